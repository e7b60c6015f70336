// cockatiel.mjs -- cockatiel's retry and circuit breaker against fakegate (harness.mjs runs
// the scenarios). Default: retry(handleAll, {}) around p-retry-style code (throw when
// !res.ok, a 2000 ms timeout per attempt): no maxAttempts and no backoff given. Configured:
// handleWhen(retryable only), 4 attempts, a backoff that waits Retry-After (plus jitter) or
// full jitter, and a per-attempt timeout policy (TimeoutStrategy.Aggressive, whose signal
// aborts the fetch). Extra: the circuit breaker's half-open state under a burst of callers.
import { runLibrary, summary, load, versionOf, errorName, fetchOnce, AttemptError, jitter, halfOpenCase, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const c = await load("cockatiel");
const { retry, handleAll, handleWhen, wrap, timeout, TimeoutStrategy, circuitBreaker, ConsecutiveBreaker, TaskCancelledError } = c;

async function outcome(p) {
  try { return String((await p).status); } catch (e) { return e.status ? String(e.status) : errorName(e); }
}

const naive = (req) => async () => {
  const r = await fetch(req.url, { method: "POST", headers: req.headers, body: req.body, signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
  await r.arrayBuffer();
  if (!r.ok) throw Object.assign(new Error(r.statusText), { status: r.status });
  return r;
};
const plain = retry(handleAll, {});

// A backoff factory: Retry-After of the failed attempt plus up to 500 ms, else full jitter.
const afterOrJitter = (n = 1) => ({
  next: (ctx) => {
    const e = ctx.result?.error;
    return { duration: e?.afterMs ? e.afterMs + jitter(0, 500) : jitter(n), next: afterOrJitter(n + 1).next };
  },
});
const tuned = wrap(
  retry(handleWhen((e) => e.retry === true || e instanceof TaskCancelledError), { maxAttempts: 4, backoff: afterOrJitter() }),
  timeout(CLIENT_TIMEOUT_MS, TimeoutStrategy.Aggressive),
);

async function careful(req, ctx) {
  return outcome(tuned.execute(async ({ signal }) => {
    const o = await fetchOnce(req, { timeoutMs: 10 * CLIENT_TIMEOUT_MS, signal });
    if (o.status >= 200 && o.status < 300) return o;
    throw new AttemptError(o);
  }, ctx.signal));
}

const breaker = () => circuitBreaker(handleAll, { halfOpenAfter: 500, breaker: new ConsecutiveBreaker(3) });
const b = breaker();

summary(await runLibrary({
  name: "cockatiel", slug: "cockatiel", version: versionOf("cockatiel"),
  default: (req, ctx) => outcome(plain.execute(naive(req), ctx.signal)),
  configured: careful,
  expect: {
    default: {
      lost: { arrivals: 2, keys: 1, charges: 1, client: "200", maxGapMs: 1000 },   // at once: ConstantBackoff(0)
      ra503: { arrivals: 2, charges: 1, client: "200", findings: ["early_retry"] },
      ra_frac: { arrivals: 2, client: "200", maxGapMs: 1000 },
      ra_neg: { arrivals: 2, client: "200", maxGapMs: 1000 },
      timeout: { arrivals: 2, keys: 1, charges: 1, client: "200" },
      r4xx: { hasFinding: "retried_4xx" },                                          // no maxAttempts: until stopped
      burst: { everyArrivals: 2, charges: 6, client: "200", gapsWithin: [0, 1000] },   // at once: no backoff, no jitter
    },
  },
  extra: [halfOpenCase({
    name: "circuitBreaker(ConsecutiveBreaker(3), halfOpenAfter 500 ms): half-open",
    fire: (req) => outcome(b.execute(naive(req))), waitMs: 600, want: { during_probe: 1, reached: 10 },
  })],
}));
