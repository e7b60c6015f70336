// axios.mjs -- axios with axios-retry against fakegate (harness.mjs runs the scenarios).
// Default: axiosRetry(instance) with no options, axios timeout 2000 ms. Configured: network
// errors, timeouts, 409, 429 and 5xx retried for any method, Retry-After honoured with jitter
// on top, full jitter otherwise, shouldResetTimeout so each attempt gets its own timeout.
import { runLibrary, summary, load, versionOf, errorName, jitter, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const axios = (await load("axios")).default;
const axiosRetryModule = await load("axios-retry");
const axiosRetry = axiosRetryModule.default.default ?? axiosRetryModule.default;
const retryAfter = axiosRetryModule.retryAfter ?? axiosRetryModule.default.retryAfter;

async function outcome(p) {
  try { return String((await p).status); } catch (e) { return e.response ? String(e.response.status) : errorName(e); }
}

function instance(options) {
  const a = axios.create({ timeout: CLIENT_TIMEOUT_MS });
  axiosRetry(a, options);
  return a;
}
const plain = instance(undefined);
const tuned = instance({
  retries: 4,
  shouldResetTimeout: true,
  retryCondition: (e) => e.response ? [409, 429].includes(e.response.status) || e.response.status >= 500
    : e.code !== "ERR_CANCELED",
  retryDelay: (n, e) => {
    const ra = retryAfter(e);
    return ra ? ra + jitter(0, 500) : jitter(n);
  },
});

const post = (a) => (req, ctx) => outcome(a.post(req.url, req.body, { headers: req.headers, signal: ctx.signal }));

summary(await runLibrary({
  name: "axios-retry", slug: "axios", version: `${versionOf("axios-retry")} (axios ${versionOf("axios")})`,
  default: post(plain),
  configured: post(tuned),
  expect: {
    default: {
      lost: { arrivals: 2, keys: 1, charges: 1, client: "200" },     // a reset is a "network error": POST resent
      ra503: { arrivals: 1, charges: 0, client: "503" },
      ra_frac: { arrivals: 1, client: "503" },
      ra_neg: { arrivals: 1, client: "503" },
      timeout: { arrivals: 1, charges: 1, client: "ECONNABORTED" },
      r4xx: { arrivals: 1, client: "400" },
      burst: { everyArrivals: 1, charges: 0, client: "500" },
    },
  },
}));
