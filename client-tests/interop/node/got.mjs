// got.mjs -- got against fakegate (client-tests/interop/node/harness.mjs runs the scenarios).
// Default: got.post with only a request timeout. Configured: POST added to retry.methods,
// 409/429/5xx and network errors retried, Retry-After honoured up to 30 s (got's default cap is
// the request timeout, which would drop a longer Retry-After), full jitter added to every delay.
import { runLibrary, summary, load, versionOf, errorName, jitter, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const got = (await load("got")).default;

async function outcome(p) {
  try { return String((await p).statusCode); } catch (e) { return e.response ? String(e.response.statusCode) : errorName(e); }
}

const base = (req, ctx) => ({ headers: req.headers, body: req.body, timeout: { request: CLIENT_TIMEOUT_MS }, signal: ctx.signal });

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
  expect: {
    default: {
      lost: { arrivals: 1, charges: 1, client: "ECONNRESET" },
      ra503: { arrivals: 1, charges: 0, client: "503" },
      timeout: { arrivals: 1, charges: 1, client: "ETIMEDOUT" },
      r4xx: { arrivals: 1, client: "400" },
      burst: { everyArrivals: 1, charges: 0, client: "500" },
    },
  },
}));
