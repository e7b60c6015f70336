// libcurl.mjs -- libcurl against fakegate, through client-tests/interop/libcurl_confirm.c
// (built by the Makefile; $LIBCURL_CONFIRM). harness.mjs runs the scenarios. Default: one
// curl_easy_perform with CURLOPT_TIMEOUT_MS 2000 on a handle that has already made a request
// (--warm: a reused keep-alive connection, as in a long-lived client). Configured: the C
// program's own correct retry loop (--retry).
import { execFile } from "node:child_process";
import { runLibrary, summary, CLIENT_TIMEOUT_MS } from "./harness.mjs";

const BIN = process.env.LIBCURL_CONFIRM;
if (!BIN) throw new Error("LIBCURL_CONFIRM is not set (client-tests/interop/run sets it)");

function confirm(flags) {
  return (req, ctx) => new Promise((resolve) => {
    execFile(BIN, [...flags, req.url, req.headers.Authorization, req.key, req.body, String(CLIENT_TIMEOUT_MS)],
      { signal: ctx.signal }, (err, stdout) => resolve(err ? (err.name === "AbortError" ? "stopped" : `exit-${err.code}`) : stdout.trim()));
  });
}

const version = await new Promise((resolve) => execFile("curl-config", ["--version"], (e, out) =>
  resolve(e ? "?" : out.trim().replace(/^libcurl /, ""))));

summary(await runLibrary({
  concurrency: 4,   // each attempt is a process: a dozen at once on 2 busy cores skews the timing
  name: "libcurl", slug: "libcurl", version,
  default: confirm(["--warm"]),
  configured: confirm(["--warm", "--retry"]),
  variants: [{
    label: "default, on a new connection", scenario: "lost", adapter: confirm([]),
    want: { arrivals: 1, charges: 1, client: "curl-56" },
  }],
  expect: {
    default: {
      // A reused connection reset before any byte of the answer: libcurl resends by itself.
      lost: { arrivals: 2, keys: 1, charges: 1, client: "200", maxGapMs: 200 },
      ra503: { arrivals: 1, charges: 0, client: "503" },
      ra_frac: { arrivals: 1, client: "503" },
      ra_neg: { arrivals: 1, client: "503" },
      timeout: { arrivals: 1, charges: 1, client: "curl-28" },
      r4xx: { arrivals: 1, client: "400" },
      burst: { everyArrivals: 1, charges: 0, client: "500" },
    },
  },
}));
