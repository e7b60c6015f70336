// fetch-retry.mjs -- fetch-retry around Node's fetch against fakegate (harness.mjs runs the
// scenarios). Default: fetchRetry(fetch) with the usual fetch timeout, an
// AbortSignal.timeout(2000) in init. Configured: a fresh timeout signal per attempt (the
// wrapped fetch makes it; init's signal would be the same aborted one on every retry),
// retryOn for network errors, timeouts, 409, 429 and 5xx, Retry-After honoured with jitter on
// top, full jitter otherwise.
import { runLibrary, summary, load, versionOf, errorName, jitter, retryAfterMs, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const fetchRetry = (await load("fetch-retry")).default;

async function outcome(p) {
  try { const r = await p; await r.arrayBuffer(); return String(r.status); } catch (e) { return errorName(e); }
}

const plain = fetchRetry(fetch);
const tuned = fetchRetry((url, init) => fetch(url, {
  ...init, signal: AbortSignal.any([AbortSignal.timeout(CLIENT_TIMEOUT_MS), ...(init.callerSignal ? [init.callerSignal] : [])]),
}), {
  retryOn: (attempt, error, response) => attempt < 4 && !init0(error) &&
    (error ? true : [409, 429].includes(response.status) || response.status >= 500),
  retryDelay: (attempt, error, response) => {
    const ra = response ? retryAfterMs(response.headers.get("retry-after")) : null;
    return Math.round(ra ? ra + jitter(0, 500) : jitter(attempt));
  },
});
// The caller's own abort (the harness's window) ends the retries.
function init0(error) { return error?.name === "AbortError"; }

summary(await runLibrary({
  name: "fetch-retry", slug: "fetchretry", version: versionOf("fetch-retry"),
  default: (req, ctx) => outcome(plain(req.url, { method: "POST", headers: req.headers, body: req.body,
    signal: AbortSignal.any([AbortSignal.timeout(CLIENT_TIMEOUT_MS), ctx.signal]) })),
  configured: (req, ctx) => outcome(tuned(req.url, { method: "POST", headers: req.headers, body: req.body, callerSignal: ctx.signal })),
  expect: {
    default: {
      lost: { arrivals: 2, keys: 1, charges: 1, client: "200", minGapMs: 950 },   // any rejection is retried, 1 s later
      ra503: { arrivals: 1, charges: 0, client: "503" },
      ra_frac: { arrivals: 1, client: "503" },
      ra_neg: { arrivals: 1, client: "503" },                          // retryOn [] : statuses never
      // Retried 1 s later with the same init, whose timeout signal has fired: every resend fails
      // before it is sent.
      timeout: { arrivals: 1, charges: 1, client: "TimeoutError" },
      r4xx: { arrivals: 1, client: "400" },
      burst: { everyArrivals: 1, charges: 0, client: "500" },
    },
  },
}));
