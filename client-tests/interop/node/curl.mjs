// curl.mjs -- the curl command line against fakegate (harness.mjs runs the scenarios; each
// attempt is `curl` run as a child process). Default: curl --retry 3 --max-time 2 (--retry is
// the option under test; curl retries nothing without it). Configured: --retry-all-errors
// added, so a reset or an empty reply is retried too; without --fail a 4xx is no error, so it
// is still not retried. curl has no jitter: its delays are 1 s, 2 s, 4 s ... or Retry-After,
// exactly, so a burst of failures is resent at one instant whatever the flags.
import { execFile } from "node:child_process";
import { runLibrary, summary, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const CURL = process.env.CURL ?? "curl";

// The body goes to stdout, the status after it: with `-o /dev/null`, curl 7.88 fails a retry
// with exit 23 (it cannot truncate /dev/null before writing the next attempt's body).
function curl(extra, { output = null } = {}) {
  return (req, ctx) => new Promise((resolve) => {
    const args = ["-s", ...(output ? ["-o", output] : []), "-w", "\n%{http_code}", "--max-time", String(CLIENT_TIMEOUT_MS / 1000), ...extra,
      ...Object.entries(req.headers).flatMap(([k, v]) => ["-H", `${k}: ${v}`]), "--data-binary", req.body, req.url];
    execFile(CURL, args, { signal: ctx.signal }, (err, stdout) => {
      if (err && err.name === "AbortError") resolve("stopped");
      else if (err && typeof err.code === "number") resolve(`curl-${err.code}`);
      else resolve(stdout.trim().split("\n").pop());
    });
  });
}

const version = await new Promise((resolve) => execFile(CURL, ["--version"], (e, out) => resolve((out || "").split(" ")[1] ?? "?")));

summary(await runLibrary({
  concurrency: 4,   // each attempt is a process: a dozen at once on 2 busy cores skews the timing
  name: "curl --retry", slug: "curl", version,
  default: curl(["--retry", "3"]),
  configured: curl(["--retry", "4", "--retry-all-errors", "--retry-max-time", "30"]),
  variants: [{
    label: "default, -o /dev/null", scenario: "ra503", adapter: curl(["--retry", "3"], { output: "/dev/null" }),
    want: { arrivals: 1, client: "curl-23" },   // the retry never leaves: (23) writing its output failed
  }],
  expect: {
    default: {
      lost: { arrivals: 1, charges: 1, client: "curl-56" },                   // a reset is not "transient"
      ra503: { arrivals: 2, keys: 1, charges: 1, client: "200", findings: [] }, // waits Retry-After
      ra_frac: { arrivals: 2, client: "200", minGapMs: 1950, maxGapMs: 2400 },   // "2.5" read as 2 s
      ra_neg: { arrivals: 2, client: "200", minGapMs: 950, maxGapMs: 1400 },     // "-1" ignored: its 1 s backoff
      timeout: { arrivals: 2, keys: 1, charges: 1, client: "200" },           // a timeout is transient: POST resent
      r4xx: { arrivals: 1, client: "400" },
      // Exactly 1 s after each failure: no jitter. (Whether the report sees the resends bunched
      // depends on how close together the processes' first attempts were.)
      burst: { everyArrivals: 2, charges: 6, client: "200", gapsWithin: [950, 1300] },
    },
    configured: {
      burst: { everyArrivals: 2, charges: 6, client: "200", gapsWithin: [950, 1300], findings: undefined },   // curl has no jitter
    },
  },
}));
