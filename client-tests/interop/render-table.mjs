// render-table.mjs -- the README's "Tested with" table from a run's observations
// (client-tests/interop/run writes them to build/interop/results.jsonl). Usage:
//   node render-table.mjs results.jsonl > table.md
// One row per library: its defaults in each scenario, as fakegate saw them, and the settings
// its configured instance used (which passed every scenario, or the row says which not);
// then every other variant measured, one line each.
import { readFileSync } from "node:fs";

const rows = readFileSync(process.argv[2], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));

const ORDER = ["got", "axios-retry", "fetch-retry", "p-retry", "cockatiel", "opossum", "urllib3 Retry",
  "requests HTTPAdapter", "tenacity", "curl --retry", "libcurl"];
const SCEN = [["response lost", "lost"], ["503 + Retry-After: 2", "503 + Retry-After 2 s"],
  [["503 + Retry-After: 2.5", "503 + Retry-After: -1"], "Retry-After `2.5` / `-1`"], ["timeout", "timeout"],
  ["400 on every", "persistent 400"], ["payments get 500 at once", "6 × 500 at once"]];

// What the configured instance was (the programs under client-tests/interop say it in code).
const SETTINGS = {
  "got": "`retry: {limit, methods: ['POST'], statusCodes: [409, 429, 5xx], errorCodes, maxRetryAfter, calculateDelay}` adding jitter",
  "axios-retry": "`retryCondition` for network errors, timeouts, 409/429/5xx on any method; `retryDelay` = Retry-After or full jitter; `shouldResetTimeout: true`",
  "fetch-retry": "a wrapped fetch with a new `AbortSignal.timeout` per attempt; `retryOn` function (errors, 409/429/5xx); `retryDelay` function (Retry-After or jitter)",
  "p-retry": "`shouldRetry` (no 4xx), `onFailedAttempt` waits Retry-After, `randomize: true`, `minTimeout: 500`",
  "cockatiel": "`retry(handleWhen(retryable), {maxAttempts: 4, backoff})` with a Retry-After-aware jittered backoff, wrapped around `timeout(…, Aggressive)`",
  "opossum": "a per-call fetch timeout, `volumeThreshold: 5`, `errorFilter` for 4xx, a jittered retry loop (same key) around `fire()`",
  "urllib3 Retry": "`Retry(total=4, allowed_methods=None, status_forcelist=[409, 429, 5xx], respect_retry_after_header=True)` subclassed for jitter",
  "requests HTTPAdapter": "`HTTPAdapter(max_retries=<that Retry subclass>)`",
  "tenacity": "`retry_if_exception(retryable)`, `stop_after_attempt(5)`, wait = Retry-After + jitter else `wait_random_exponential`, `reraise=True`",
  "curl --retry": "`--retry 4 --retry-all-errors --retry-max-time 30 --max-time 2` (no `--fail`, so 4xx stays final); no jitter possible",
  "libcurl": "the application's loop: same handle and key, `CURLINFO_RETRY_AFTER`, jitter (client-tests/interop/libcurl_confirm.c)",
};

function cell(r) {
  if (!r) return "—";
  const o = r.observation;
  const burst = o.arrivals_each.length > 1;
  const findings = o.findings.length ? `; report: **${o.findings.join(", ")}**` : "";
  if (burst) {
    if (o.arrivals_each.every((n) => n === 1)) return `not resent${findings}`;
    return `resent ${o.resend_gaps_ms[0]}–${o.resend_gaps_ms[1]} ms after each 500${findings}`;
  }
  if (o.arrivals === 1) {
    const charged = o.charges > 0 && !/^2/.test(r.client) ? "; charged, the caller saw an error" : "";
    return `not resent (${r.client}${charged})${findings}`;
  }
  const resends = o.arrivals - 1;
  const keys = o.keys > 1 ? `, ${o.keys} keys` : ", same key";
  const what = resends === 1 ? `resent after ${o.gaps_ms[0]} ms` : `resent ${resends}× (first after ${o.gaps_ms[0]} ms)`;
  return `${what}${keys} → ${r.client}${findings}`;
}

// The odd Retry-After values: only whether and when it resent (the report does not judge them).
function short(r) {
  if (!r) return "—";
  const o = r.observation;
  if (o.arrivals === 1) return /^[0-9]/.test(r.client) ? "not resent" : `not resent (${r.client})`;
  return `after ${o.gaps_ms[0]} ms`;
}

const libs = [...new Set(rows.map((r) => r.library))].sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b));
const out = [];
out.push("| library | version | " + SCEN.map(([, h]) => h).join(" | ") + " | configured instance (settings) |");
out.push("|---|---|" + SCEN.map(() => "---").join("|") + "|---|");
const extra = [];
for (const lib of libs) {
  const mine = rows.filter((r) => r.library === lib);
  if (lib === "pytest-fakegate") { extra.push(...mine.map((r) => `- ${lib}: ${r.text}${r.ok ? "" : " (FAILED)"}`)); continue; }
  const def = (s) => mine.find((r) => r.mode === "default" && r.scenario.includes(s));
  const col = (s) => Array.isArray(s) ? s.map((x) => short(def(x))).join(" / ") : cell(def(s));
  const conf = mine.filter((r) => r.mode === "configured");
  const confBad = conf.filter((r) => !r.ok || r.observation.findings.length);
  const confText = conf.length === 0 ? "—" : (confBad.length === 0
    ? `all ${conf.length} scenarios: same key, charged once, no findings`
    : `${conf.length - confBad.length}/${conf.length} clean; ${confBad.map((r) => `${r.scenario}: ${r.observation.findings.join(", ") || r.problems.join("; ")}`).join("; ")}`);
  const version = mine[0].version;
  out.push(`| ${lib} | ${version} | ${SCEN.map(([s]) => col(s)).join(" | ")} | ${confText}. ${SETTINGS[lib] ?? ""} |`);
  for (const r of mine.filter((x) => x.mode !== "default" && x.mode !== "configured")) {
    extra.push(`- ${lib}, ${r.mode}, ${r.scenario}: ${r.text}${r.ok ? "" : " (FAILED)"}`);
  }
  for (const r of conf.filter((x) => x.scenario.includes("at once"))) {
    extra.push(`- ${lib}, configured, ${r.scenario}: ${r.text}`);
  }
}
const failed = rows.filter((r) => !r.ok).length;
console.log(out.join("\n"));
console.log("\nAlso measured:\n\n" + extra.join("\n"));
console.log(`\n${rows.length} cases, ${failed} failed.`);
