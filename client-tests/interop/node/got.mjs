// got.mjs -- got against fakegate (client-tests/interop/node/harness.mjs runs the scenarios).
// Default: got.post with only a request timeout. Configured: POST added to retry.methods,
// 409/429/5xx and network errors retried, Retry-After honoured up to 30 s (got's default cap is
// the request timeout, which would drop a longer Retry-After), full jitter added to every delay.
import { runLibrary, summary, load, versionOf, errorName, jitter, confirmRequest, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const got = (await load("got")).default;

async function outcome(p) {
  try { return String((await p).statusCode); } catch (e) { return e.response ? String(e.response.statusCode) : errorName(e); }
}

const base = (req, ctx) => ({ headers: req.headers, body: req.body, timeout: { request: CLIENT_TIMEOUT_MS }, signal: ctx.signal });

// A read (GET: in got's retry.methods) answered 503 with Retry-After: got retries it only when
// Retry-After is at most maxRetryAfter, which defaults to the request timeout.
function readCase(retryAfterS, want) {
  return {
    name: `GET read, 503 + Retry-After: ${retryAfterS} (request timeout ${CLIENT_TIMEOUT_MS} ms)`,
    profile: { name: "interop", routes: { read: { faults: [{ kind: "error", p: 1, status: 503, code: "SERVICE_UNAVAILABLE",
      when: "before", retry_after: { format: "seconds", value: retryAfterS }, attempts: [1] }] } } },
    run: async (gate) => {
      const req = confirmRequest(gate, `order-got-read-${retryAfterS}-${Date.now()}`);
      await got.post(req.url, { headers: req.headers, body: req.body });
      const client = await outcome(got.get(`${gate.url}/v1/payments/orders/${req.orderId}`, { headers: gate.headers,
        timeout: { request: CLIENT_TIMEOUT_MS } }));
      const reads = (await gate.requests({ orderId: req.orderId })).filter((r) => r.route === "read");
      const t = reads.map((r) => Date.parse(r.arrived_at));
      const observation = { arrivals: reads.length, gaps_ms: t.slice(1).map((x, i) => Math.round(x - t[i])), findings: [] };
      const problems = [];
      if (reads.length !== want.arrivals) problems.push(`reads ${reads.length}, expected ${want.arrivals}`);
      if (client !== want.client) problems.push(`client ${client}, expected ${want.client}`);
      const text = reads.length === 1 ? `1 arrival, not retried, client: ${client}`
        : `${reads.length} arrivals, gaps ${observation.gaps_ms.join(",")} ms, client: ${client}`;
      return { observation, client, problems, text };
    },
  };
}

summary(await runLibrary({
  name: "got", slug: "got", version: versionOf("got"),
  default: (req, ctx) => outcome(got.post(req.url, base(req, ctx))),
  configured: (req, ctx) => outcome(got.post(req.url, {
    ...base(req, ctx),
    retry: {
      limit: 4,
      methods: ["POST"],
      statusCodes: [409, 429, 500, 502, 503, 504],
      errorCodes: ["ETIMEDOUT", "ECONNRESET", "EPIPE", "ECONNREFUSED"],
      maxRetryAfter: 30000,
      // computedValue is 0 when got's rules say "do not retry", else Retry-After or its backoff.
      calculateDelay: ({ computedValue, retryAfter, attemptCount }) =>
        computedValue === 0 ? 0 : (retryAfter ? retryAfter + jitter(0, 500) : 1 + jitter(attemptCount)),
    },
  })),
  extra: [readCase(3, { arrivals: 1, client: "503" }), readCase(1, { arrivals: 2, client: "200" })],
  expect: {
    default: {
      lost: { arrivals: 1, charges: 1, client: "ECONNRESET" },
      ra503: { arrivals: 1, charges: 0, client: "503" },
      ra_frac: { arrivals: 1, client: "503" },
      ra_neg: { arrivals: 1, client: "503" },
      timeout: { arrivals: 1, charges: 1, client: "ETIMEDOUT" },
      r4xx: { arrivals: 1, client: "400" },
      burst: { everyArrivals: 1, charges: 0, client: "500" },
    },
  },
}));
