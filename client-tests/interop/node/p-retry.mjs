// p-retry.mjs -- p-retry around Node's fetch against fakegate (harness.mjs runs the
// scenarios). Default: pRetry(run) with run as in p-retry's own example (throw when !res.ok),
// a 2000 ms AbortSignal.timeout per attempt. Configured: only network errors, timeouts, 409,
// 429 and 5xx retried (shouldRetry), Retry-After waited in onFailedAttempt, then p-retry's
// randomized backoff on top (randomize: true).
import { runLibrary, summary, load, versionOf, errorName, fetchOnce, AttemptError, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const pRetry = (await load("p-retry")).default;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function outcome(p) {
  try { return String((await p).status); } catch (e) { return e.status ? String(e.status) : errorName(e); }
}

// p-retry's README shape: fetch, and throw on a status that is not ok.
const naive = (req, key = () => req.key) => async () => {
  const r = await fetch(req.url, { method: "POST", headers: { ...req.headers, "Idempotency-Key": key() }, body: req.body,
    signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
  await r.arrayBuffer();
  if (!r.ok) throw Object.assign(new Error(r.statusText), { status: r.status });
  return r;
};

async function careful(req, ctx) {
  return outcome(pRetry(async () => {
    const o = await fetchOnce(req, { signal: ctx.signal });
    if (o.status >= 200 && o.status < 300) return o;
    throw new AttemptError(o);
  }, {
    retries: 4, minTimeout: 500, maxTimeout: 4000, factor: 2, randomize: true, signal: ctx.signal,
    shouldRetry: ({ error }) => error.retry === true,
    onFailedAttempt: async ({ error }) => { if (error.afterMs) await sleep(error.afterMs); },
  }));
}

summary(await runLibrary({
  name: "p-retry", slug: "pretry", version: versionOf("p-retry"),
  default: (req, ctx) => outcome(pRetry(naive(req), { signal: ctx.signal })),
  configured: careful,
  variants: [{
    label: "default, key made inside the retried function", scenario: "lost", windowMs: 4000,
    adapter: (req, ctx) => { let n = 0; return outcome(pRetry(naive(req, () => `${req.key}-${++n}`), { signal: ctx.signal })); },
    want: { arrivals: [2, 3], hasFinding: "new_key_resend" },
  }],
  expect: {
    default: {
      lost: { arrivals: 2, keys: 1, charges: 1, client: "200", minGapMs: 950 },
      ra503: { arrivals: 2, charges: 1, client: "200", findings: ["early_retry"] },   // 1 s, not 2
      ra_frac: { arrivals: 2, client: "200", minGapMs: 950 },
      ra_neg: { arrivals: 2, client: "200", minGapMs: 950 },
      timeout: { arrivals: 2, keys: 1, charges: 1, client: "200" },                   // a TimeoutError is retried
      r4xx: { arrivals: [2, 3], hasFinding: "retried_4xx" },                          // 1 s, then 2 s: stopped at 4 s
      // Exactly minTimeout (1 s) after each failure, randomize false: no jitter. The report's
      // synchronized_retries needs the resends within 10 ms, which a loaded machine smears.
      burst: { everyArrivals: 2, charges: 6, client: "200", gapsWithin: [950, 1400] },
    },
  },
}));
