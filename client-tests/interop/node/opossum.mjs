// opossum.mjs -- opossum's circuit breaker against fakegate (harness.mjs runs the scenarios).
// opossum does not retry: its default is one call per fire(), its own timeout (10 s by
// default; 2000 ms here) rejecting the caller while the request goes on. Default: new
// CircuitBreaker(action, {timeout: 2000}) around a fetch with no timeout of its own.
// Configured: a timeout of the fetch's own per call (opossum's a backstop), volumeThreshold
// so one failure does not open it, errorFilter so a 4xx does not count, and a correct retry loop
// (harness.retrying: same key, 5xx and timeouts, Retry-After, jitter) around fire().
// Extra: the half-open state under a burst of callers.
import { runLibrary, summary, load, versionOf, errorName, retrying, halfOpenCase, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const CircuitBreaker = (await load("opossum")).default;

async function outcome(p) {
  try { return String((await p).status); } catch (e) { return e.status ? String(e.status) : errorName(e); }
}

// The action: one fetch, throwing on a status that is not ok; signal from opossum when given.
async function action(req, signal) {
  const r = await fetch(req.url, { method: "POST", headers: req.headers, body: req.body, signal });
  await r.arrayBuffer();
  if (!r.ok) throw Object.assign(new Error(r.statusText), { status: r.status, retryAfter: r.headers.get("retry-after") });
  return r;
}

// One breaker per case: the harness runs scenarios at once, and one scenario's failures must
// not open another's breaker.
const plainBreaker = () => new CircuitBreaker((req) => action(req), { timeout: CLIENT_TIMEOUT_MS });
// volumeThreshold: opossum's default 0 lets a breaker's first failure (1 of 1 = 100 %) open it,
// so the retry of a lost answer would only ever get EOPENBREAKER. The timeout is the fetch's
// own, per call; opossum's is a backstop (its abortController is one for all calls, below).
const filter4xx = (e) => e.status >= 400 && e.status < 500 && ![409, 429].includes(e.status);
const carefulBreaker = () => new CircuitBreaker((req) => action(req, AbortSignal.timeout(CLIENT_TIMEOUT_MS)), {
  timeout: 2 * CLIENT_TIMEOUT_MS, volumeThreshold: 5, errorFilter: filter4xx,
});
// opossum's own abort: one controller for every call, renewed only on half-open and close.
function abortingBreaker() {
  const b = new CircuitBreaker((req) => action(req, b.getSignal()), {
    timeout: CLIENT_TIMEOUT_MS, autoRenewAbortController: true, volumeThreshold: 5, errorFilter: filter4xx,
  });
  return b;
}

async function careful(req, ctx, b = carefulBreaker()) {
  return retrying(async () => {
    try { const r = await b.fire(req); return { status: r.status }; } catch (e) {
      return e.status ? { status: e.status, retryAfter: e.retryAfter } : { error: errorName(e) };
    }
  }, { signal: ctx.signal });
}

const herdBreaker = new CircuitBreaker((req) => action(req), { timeout: 5000, resetTimeout: 500, volumeThreshold: 3, errorThresholdPercentage: 50 });

summary(await runLibrary({
  name: "opossum", slug: "opossum", version: versionOf("opossum"),
  default: (req) => outcome(plainBreaker().fire(req)),
  configured: careful,
  variants: [{
    label: "default breaker inside a correct retry loop", scenario: "lost",
    adapter: (req, ctx) => careful(req, ctx, plainBreaker()),
    want: { arrivals: 1, charges: 1, client: "EOPENBREAKER" },   // opened by the first failure
  }, {
    label: "configured, but autoRenewAbortController for the timeout", scenario: "timeout",
    adapter: (req, ctx) => careful(req, ctx, abortingBreaker()),
    // The timeout aborted the breaker's one controller; while closed it is not renewed, so
    // every resend is aborted before it leaves.
    want: { arrivals: 1, charges: 1, client: "AbortError" },
  }],
  expect: {
    default: {
      lost: { arrivals: 1, charges: 1, client: "ECONNRESET" },     // fetch failed: no retry
      ra503: { arrivals: 1, charges: 0, client: "503" },
      ra_frac: { arrivals: 1, client: "503" },
      ra_neg: { arrivals: 1, client: "503" },
      timeout: { arrivals: 1, charges: 1, client: "ETIMEDOUT" },   // the fetch itself goes on
      r4xx: { arrivals: 1, client: "400" },
      burst: { everyArrivals: 1, charges: 0, client: "500" },
    },
  },
  extra: [halfOpenCase({
    name: "resetTimeout 500 ms, volumeThreshold 3: half-open",
    fire: (req) => outcome(herdBreaker.fire(req)), waitMs: 600, want: { during_probe: 1, reached: 1 },
  })],
}));
