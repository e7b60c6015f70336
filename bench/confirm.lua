-- wrk script for every confirm scenario of `make bench` (bench/run.sh).
--
-- Environment (read in every wrk Lua state):
--   BENCH_MODE   unique       a fresh paymentKey/orderId per request (no Idempotency-Key)
--                unique_idem  the same, plus a fresh Idempotency-Key per request
--                replay       one fixed body and one fixed Idempotency-Key for every request
--   BENCH_PREFIX a string that makes the keys of this run unique (default: the time)
--   BENCH_OUT    file that done() writes a one-line JSON summary to
--   BENCH_KEYS   N > 0: each request (modes unique, unique_idem) sets its own Authorization
--                header, taking the secret keys test_sk_bench_0000 .. test_sk_bench_<N-1> in
--                turn (N tenants, scenario 8); 1 is the one key test_sk_bench, through the same
--                per-request code, so the two runs cost the client the same. Unset: the fixed
--                header below, set once.
--
-- The same script drives fakegate and the nginx baseline, so the client-side cost (Lua building
-- a request) is the same for both.

local mode   = os.getenv("BENCH_MODE") or "unique"
local prefix = os.getenv("BENCH_PREFIX") or tostring(os.time())

wrk.method = "POST"
wrk.path   = "/v1/payments/confirm"
wrk.headers["Content-Type"]  = "application/json"
-- base64("test_sk_bench:")
wrk.headers["Authorization"] = "Basic dGVzdF9za19iZW5jaDo="

-- Standard base64 (wrk's LuaJIT has no encoder): for the Basic credentials of BENCH_KEYS.
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(s)
   local out = {}
   for i = 1, #s, 3 do
      local a, b, c = s:byte(i, i + 2)
      local n = a * 65536 + (b or 0) * 256 + (c or 0)
      local q = {}
      for k = 1, 4 do
         local v = math.floor(n / 64 ^ (4 - k)) % 64
         q[k] = B64:sub(v + 1, v + 1)
      end
      if not b then q[3] = "=" end
      if not c then q[4] = "=" end
      out[#out + 1] = table.concat(q)
   end
   return table.concat(out)
end
assert(b64("test_sk_bench:") == "dGVzdF9za19iZW5jaDo=")

local n_keys = tonumber(os.getenv("BENCH_KEYS") or "") or 0
local auth = nil
if n_keys == 1 then
   auth = { "Basic " .. b64("test_sk_bench:") }
elseif n_keys > 1 then
   auth = {}
   for i = 0, n_keys - 1 do
      auth[i + 1] = "Basic " .. b64(string.format("test_sk_bench_%04d:", i))
   end
end

local next_thread = 0
function setup(thread)
   next_thread = next_thread + 1
   thread:set("tid", next_thread)
end

if mode == "replay" then
   wrk.headers["Idempotency-Key"] = "ik_replay_" .. prefix
   wrk.body = '{"paymentKey":"pk_replay_' .. prefix .. '","orderId":"o_replay_' .. prefix ..
              '","amount":15000}'
else
   local counter = 0
   local idem = (mode == "unique_idem")
   function request()
      counter = counter + 1
      local id = prefix .. "_" .. tostring(tid) .. "_" .. counter
      if auth then
         -- the threads start half the keys apart, so they seldom hit one tenant at once
         wrk.headers["Authorization"] = auth[(counter + (tid - 1) * math.floor(#auth / 2)) % #auth + 1]
      end
      if idem then
         wrk.headers["Idempotency-Key"] = "ik_" .. id
      end
      return wrk.format(nil, nil, nil,
         '{"paymentKey":"pk_' .. id .. '","orderId":"o_' .. id .. '","amount":15000}')
   end
end

function done(summary, latency, requests)
   local out = os.getenv("BENCH_OUT")
   if not out then return end
   local e = summary.errors
   local f = assert(io.open(out, "w"))
   f:write(string.format(
      '{"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"min":%d,"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.mean, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency:percentile(99.9), latency.max))
   f:close()
end
