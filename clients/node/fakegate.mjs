// fakegate.mjs -- fakegate's admin API (docs/admin.md §5) for Node 18+ test suites, with no
// dependencies (the global fetch, node:child_process). start() runs the binary on a free port
// and reads its ready line; connect() names a running server (FAKEGATE_URL). Every admin call
// of a handle carries X-Fakegate-Tenant: its secret key (docs/tenants.md §9), so handles of
// different keys never see each other's ledger, journal, report or profile; the gateway
// clock is the one thing they share.
import { spawn } from "node:child_process";
import { Buffer } from "node:buffer";

export const DEFAULT_KEY = "test_sk_fakegate";

// The one stdout line of a started server (docs/cli.md §1, "Start-up").
const READY = /^fakegate listening on (http:\/\/\S+) profile=(\S+) seed=(\d+)/;

// Journal filters (GET /__admin/requests) by their JavaScript names, as the API spells them.
const FILTERS = { order_id: "orderId", payment_key: "paymentKey", idempotency_key: "idempotencyKey" };

export class FakegateError extends Error {}

/** One tenant of one server. url: the base URL; secretKey: the tenant's key, which the code
 *  under test sends (headers, auth). A handle made by start() owns its process: stop() it. */
export class Fakegate {
  constructor(url, { secretKey = DEFAULT_KEY, adminToken = null, child = null, seed = null } = {}) {
    this.url = url.replace(/\/+$/, "");
    this.secretKey = secretKey;
    this.adminToken = adminToken;
    this.child = child;
    this.seed = seed;
    /** The gateway clock (docs/webhooks.md §6.7): server-wide. */
    this.clock = {
      now: () => this.call("GET", "/__admin/clock"),
      advance: (seconds) => this.call("POST", "/__admin/clock", { advance_s: seconds }),
    };
  }

  /** The Authorization value for this tenant's key: Basic base64(key + ":"). */
  get auth() { return "Basic " + Buffer.from(this.secretKey + ":").toString("base64"); }
  /** { Authorization: auth }: spread into the client's headers. */
  get headers() { return { Authorization: this.auth }; }

  /** Another tenant of the same server (the process stays with this handle). */
  tenant(secretKey) {
    return new Fakegate(this.url, { secretKey, adminToken: this.adminToken, seed: this.seed });
  }

  /** This tenant's profile: a shipped name ("lossy") or a whole profile object. */
  setProfile(profile) {
    return this.call("PUT", "/__admin/profile", typeof profile === "string" ? { name: profile } : profile);
  }
  /** Empty this tenant; optionally switch its profile. Creates the tenant if it is new. */
  reset(profile) { return this.call("POST", "/__admin/reset", profile === undefined ? undefined : { profile }); }
  /** The retry-behaviour report of this tenant: { findings: [...], judged_requests, ... }. */
  report() { return this.call("GET", "/__admin/report"); }
  /** Throws FakegateError naming every finding; returns the report when there is none. */
  async assertNoFindings() {
    const r = await this.report();
    if (r.findings.length) {
      throw new FakegateError("fakegate found retry problems:\n  " + r.findings
        .map((f) => `${f.kind} x${f.count} (${f.rule}): ${f.examples.join(", ")}`).join("\n  "));
    }
    return r;
  }
  /** The ledger: [{ payment, confirm_attempts, idempotency_keys, charges }]. */
  async payments(orderId) {
    const q = orderId === undefined ? "" : "?" + new URLSearchParams({ orderId });
    return (await this.call("GET", "/__admin/payments" + q)).payments;
  }
  /** The ledger entry of one orderId, or null. */
  async payment(orderId) { return (await this.payments(orderId))[0] ?? null; }
  /** The journal, oldest first; filters: orderId (or order_id), paymentKey, idempotencyKey,
   *  route, status, outcome, since_id, limit. */
  async requests(filters = {}) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v !== undefined && v !== null) q.set(FILTERS[k] ?? k, String(v));
    const s = q.toString();
    return (await this.call("GET", "/__admin/requests" + (s ? "?" + s : ""))).requests;
  }
  health() { return this.call("GET", "/healthz", undefined, { tenant: false }); }

  /** End the process this handle started: SIGTERM, SIGKILL after timeoutMs. Its exit code. */
  async stop(timeoutMs = 5000) {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    const code = await exited;
    clearTimeout(timer);
    return code;
  }

  async call(method, path, body, { tenant = true } = {}) {
    const headers = {};
    if (tenant) headers["X-Fakegate-Tenant"] = this.secretKey;
    if (this.adminToken) headers.Authorization = "Bearer " + this.adminToken;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(this.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    if (!r.ok) throw new FakegateError(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }
}

/** Start fakegate on 127.0.0.1, a free port, --quiet, and wait for its ready line.
 *  bin: default FAKEGATE_BIN, else "fakegate" on PATH; args: more flags; stderr: "inherit"
 *  (default) or "ignore". Rejects with FakegateError if it has not started within timeoutMs. */
export function start({ bin = process.env.FAKEGATE_BIN || "fakegate", args = [], secretKey = DEFAULT_KEY,
  seed, timeoutMs = 10000, stderr = "inherit" } = {}) {
  const argv = ["--host", "127.0.0.1", "--port", "0", "--quiet", ...(seed === undefined ? [] : ["--seed", String(seed)]), ...args];
  const child = spawn(bin, argv, { stdio: ["ignore", "pipe", stderr] });
  return new Promise((resolve, reject) => {
    let out = "";
    const fail = (why) => { clearTimeout(timer); child.kill("SIGKILL"); reject(new FakegateError(`${bin} ${argv.join(" ")}: ${why}`)); };
    const timer = setTimeout(() => fail(`no ready line within ${timeoutMs} ms`), timeoutMs);
    child.once("error", (e) => fail(e.message));
    child.once("exit", (code) => fail(`exited with ${code} before its ready line (its message is on stderr)`));
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (!out.includes("\n")) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      child.stdout.removeAllListeners("data");
      child.stdout.resume();            // nothing more comes; keep the pipe drained anyway
      process.once("exit", () => child.kill("SIGTERM"));   // never outlive the suite
      const m = READY.exec(out);
      if (!m) { child.kill("SIGKILL"); reject(new FakegateError(`unexpected first line: ${out.trim()}`)); return; }
      resolve(new Fakegate(m[1], { secretKey, child, seed: BigInt(m[3]) }));
    });
  });
}

/** A handle on a running server: url, else FAKEGATE_URL. */
export function connect(url = process.env.FAKEGATE_URL, { secretKey = DEFAULT_KEY, adminToken = process.env.FAKEGATE_ADMIN_TOKEN ?? null } = {}) {
  if (!url) throw new FakegateError("connect: no url and FAKEGATE_URL is not set");
  return new Fakegate(url, { secretKey, adminToken });
}

/** FAKEGATE_URL's server if set, else a started one: the one line a suite needs. */
export async function fakegate(options = {}) {
  return process.env.FAKEGATE_URL ? connect(process.env.FAKEGATE_URL, options) : start(options);
}
