// harness.mjs -- the interop suite's scenarios for Node-driven clients (docs/interop.md). A
// library's program gives two adapters, its defaults and a correctly configured instance,
// each a function that confirms one payment the way that library would; the harness starts
// a fresh fakegate on port 0 (clients/node), runs every scenario in a tenant of its own (own
// profile, ledger, journal and report), and judges each from what fakegate saw -- arrivals in
// the journal, keys and charges in the ledger, findings in the report -- not only from what
// the client returned. Prints one line per case ("ok   ..." / "FAIL ...") and appends each
// observation to $INTEROP_RESULTS (JSON lines) for the README table.
import { appendFileSync, readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { start } from "../../../clients/node/fakegate.mjs";

// Every client's own timeout, in every scenario. 2 s, not 1: on 2 cores shared with other
// builds a 1 s timeout fired before answers already sent were read.
export const CLIENT_TIMEOUT_MS = 2000;
export const RETRY_AFTER_S = 2;          // longer than every default backoff's first step (1 s)
const HANG_MS = 4000;                    // the timeout scenario's held answer: > CLIENT_TIMEOUT_MS
const BURST = 6;                         // payments failing together (synchronized_retries needs 4)

const fault = (f) => ({ name: "interop", routes: { confirm: { faults: [f] } } });

/** Import a library from the folder `npm ci` filled ($INTEROP_NODE_DIR, its node_modules):
 *  ES modules ignore NODE_PATH, so resolve it there and import the file. */
export async function load(name) {
  const dir = process.env.INTEROP_NODE_DIR;
  if (!dir) throw new Error("INTEROP_NODE_DIR is not set (client-tests/interop/run sets it)");
  return import(pathToFileURL(createRequire(join(dir, "package.json")).resolve(name)).href);
}

/** The version npm installed. */
export function versionOf(name) {
  return JSON.parse(readFileSync(join(process.env.INTEROP_NODE_DIR, "node_modules", name, "package.json"), "utf8")).version;
}

/** The faults, each on a confirm; only attempt 1 fails unless said otherwise. */
export const SCENARIOS = {
  lost: {
    title: "response lost (reset after commit)",
    profile: fault({ kind: "drop_response", p: 1, how: "reset", attempts: [1] }),
  },
  ra503: {
    title: `503 + Retry-After: ${RETRY_AFTER_S}`,
    profile: fault({ kind: "error", p: 1, status: 503, code: "SERVICE_UNAVAILABLE", when: "before",
      retry_after: { format: "seconds", value: RETRY_AFTER_S }, attempts: [1] }),
  },
  ra_frac: {
    title: "503 + Retry-After: 2.5",
    profile: fault({ kind: "error", p: 1, status: 503, code: "SERVICE_UNAVAILABLE", when: "before",
      retry_after: { format: "raw", value: "2.5" }, attempts: [1] }),
  },
  ra_neg: {
    title: "503 + Retry-After: -1",
    profile: fault({ kind: "error", p: 1, status: 503, code: "SERVICE_UNAVAILABLE", when: "before",
      retry_after: { format: "raw", value: "-1" }, attempts: [1] }),
  },
  timeout: {
    title: `timeout (answer held ${HANG_MS} ms after commit, client ${CLIENT_TIMEOUT_MS} ms)`,
    profile: fault({ kind: "drop_response", p: 1, how: "hang", hang_ms: HANG_MS, attempts: [1] }),
  },
  r4xx: {
    title: "400 on every attempt",
    profile: fault({ kind: "error", p: 1, status: 400, code: "INVALID_CARD_NUMBER", when: "before" }),
    windowMs: 4000,   // a client that retries 4xx is stopped (its signal aborted) after this
  },
  burst: {
    title: `${BURST} payments get 500 at once`,
    profile: fault({ kind: "error", p: 1, status: 500, code: "FAILED_INTERNAL_SYSTEM_PROCESSING",
      when: "before", attempts: [1] }),
    payments: BURST,
  },
};

/** A confirm request for one payment: what every adapter sends. */
export function confirmRequest(gate, orderId, { key = "idem-" + orderId } = {}) {
  return {
    url: gate.url + "/v1/payments/confirm",
    headers: { ...gate.headers, "Content-Type": "application/json", "Idempotency-Key": key },
    body: JSON.stringify({ paymentKey: "pk_" + orderId, orderId, amount: 15000 }),
    key, orderId,
  };
}

/** The Retry-After of an answer in ms (whole seconds or an HTTP-date), or null. */
export function retryAfterMs(value) {
  if (value === undefined || value === null || value === "") return null;
  const s = Number(value);
  if (Number.isFinite(s)) return Math.max(0, s * 1000);
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : Math.max(0, t - Date.now());
}

/** Full jitter on an exponential step: uniform in [0, min(cap, base * 2^n)). A base of
 *  500 ms spreads a burst's resends over a second: narrower, a loaded machine's scheduling
 *  stalls bunch them back into the report's 10 ms window. */
export function jitter(n, baseMs = 500, capMs = 4000) {
  return Math.random() * Math.min(capMs, baseMs * 2 ** n);
}

/** Classify one attempt's outcome the way a correct client must: what to do next. */
export function classify(outcome) {
  if (outcome.error) return { retry: true, reason: outcome.error };                 // timeout, reset
  const s = outcome.status;
  if (s >= 200 && s < 300) return { retry: false };
  if (s === 409 || s === 429 || s >= 500) return { retry: true, reason: String(s), afterMs: retryAfterMs(outcome.retryAfter) };
  return { retry: false, reason: String(s) };                                        // 4xx: final
}

/** An error a wrapper library can carry: status, retryAfter, whether to retry. */
export class AttemptError extends Error {
  constructor(outcome) {
    super(outcome.error ?? `HTTP ${outcome.status}`);
    Object.assign(this, outcome, classify(outcome));
  }
}

/** One attempt with the global fetch and its own timeout; never throws. */
export async function fetchOnce(req, { timeoutMs = CLIENT_TIMEOUT_MS, signal } = {}) {
  const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
  try {
    const r = await fetch(req.url, { method: "POST", headers: req.headers, body: req.body, signal: AbortSignal.any(signals) });
    await r.arrayBuffer();
    return { status: r.status, retryAfter: r.headers.get("retry-after") };
  } catch (e) {
    return { error: errorName(e) };
  }
}

/** A short name for a client error: its code, or its cause's, or its name. */
export function errorName(e) {
  if (!e) return "error";
  const code = e.code ?? e.cause?.code ?? e.cause?.cause?.code;
  if (code && typeof code === "string") return code;
  if (e.name && e.name !== "Error") return e.name;
  return (e.message || String(e)).slice(0, 60);
}

async function observe(gate, orderIds) {
  const per = [];
  for (const orderId of orderIds) {
    const reqs = (await gate.requests({ orderId })).filter((r) => r.route === "confirm");
    const ledger = await gate.payment(orderId);
    per.push({ orderId, reqs, ledger });
  }
  const report = await gate.report();
  const first = per[0];
  const t = (r) => Date.parse(r.arrived_at);
  const gaps = first.reqs.slice(1).map((r, i) => Math.round(t(r) - t(first.reqs[i])));
  const seconds = per.filter((p) => p.reqs.length > 1).map((p) => t(p.reqs[1]));
  const firstGaps = per.filter((p) => p.reqs.length > 1).map((p) => Math.round(t(p.reqs[1]) - t(p.reqs[0])));
  return {
    arrivals: first.reqs.length,
    arrivals_each: per.map((p) => p.reqs.length),
    keys: [...new Set(first.reqs.map((r) => r.idempotency_key))].length,
    gaps_ms: gaps,
    outcomes: first.reqs.map((r) => r.outcome ?? "pending"),
    charges: per.reduce((n, p) => n + (p.ledger?.charges ?? 0), 0),
    status: first.ledger?.payment?.status ?? null,
    resend_spread_ms: seconds.length > 1 ? Math.round(Math.max(...seconds) - Math.min(...seconds)) : null,
    resend_gaps_ms: firstGaps.length > 1 ? [Math.min(...firstGaps), Math.max(...firstGaps)] : null,
    findings: report.findings.map((f) => f.kind),
  };
}

function describe(o, client) {
  const parts = [`${o.arrivals} arrival${o.arrivals === 1 ? "" : "s"}`];
  if (o.arrivals_each.length > 1) parts[0] = `arrivals ${o.arrivals_each.join("/")}`;
  if (o.gaps_ms.length && o.arrivals_each.length === 1) parts.push(`gaps ${o.gaps_ms.slice(0, 4).join(",")}${o.gaps_ms.length > 4 ? ",..." : ""} ms`);
  if (o.arrivals > 1 && o.keys !== 1) parts.push(`${o.keys} keys`);
  if (o.resend_spread_ms !== null) parts.push(`resends spread ${o.resend_spread_ms} ms, each ${o.resend_gaps_ms.join("-")} ms after its failure`);
  parts.push(`client: ${client}`, `charged ${o.charges}`, `report: ${o.findings.length ? o.findings.join(",") : "none"}`);
  return parts.join(", ");
}

// What a correctly configured client shows in each scenario (per-library overrides allowed).
const CONFIGURED = {
  lost: { arrivals: 2, keys: 1, charges: 1, findings: [], client: "200" },
  ra503: { arrivals: 2, keys: 1, charges: 1, findings: [], client: "200", minGapMs: RETRY_AFTER_S * 1000 - 50 },
  // Not valid delay-seconds (RFC 9110 §10.2.3): the report does not judge them; a correct
  // client must not choke on them (it may wait 2.5 s, or treat the value as absent).
  ra_frac: { arrivals: 2, keys: 1, charges: 1, findings: [], client: "200" },
  ra_neg: { arrivals: 2, keys: 1, charges: 1, findings: [], client: "200" },
  timeout: { arrivals: 2, keys: 1, charges: 1, findings: [], client: "200" },
  r4xx: { arrivals: 1, charges: 0, findings: [], client: "400" },
  burst: { charges: BURST, findings: [], client: "200", everyArrivals: 2 },
};

function check(o, client, want) {
  const bad = [];
  const eq = (name, got, exp) => { if (JSON.stringify(got) !== JSON.stringify(exp)) bad.push(`${name} ${JSON.stringify(got)}, expected ${JSON.stringify(exp)}`); };
  if (want.arrivals !== undefined) {
    if (Array.isArray(want.arrivals)) { if (o.arrivals < want.arrivals[0] || o.arrivals > want.arrivals[1]) bad.push(`arrivals ${o.arrivals}, expected ${want.arrivals.join("-")}`); }
    else eq("arrivals", o.arrivals, want.arrivals);
  }
  if (want.everyArrivals !== undefined && o.arrivals_each.some((n) => n !== want.everyArrivals)) bad.push(`arrivals ${o.arrivals_each.join("/")}, expected ${want.everyArrivals} each`);
  if (want.keys !== undefined && o.arrivals > 1) eq("keys", o.keys, want.keys);
  if (want.charges !== undefined) eq("charges", o.charges, want.charges);
  if (want.findings !== undefined) eq("findings", [...o.findings].sort(), [...want.findings].sort());
  if (want.hasFinding !== undefined && !o.findings.includes(want.hasFinding)) bad.push(`no ${want.hasFinding} finding`);
  if (want.client !== undefined && !String(client).startsWith(want.client)) bad.push(`client ${client}, expected ${want.client}`);
  if (want.minGapMs !== undefined && !(o.gaps_ms[0] >= want.minGapMs)) bad.push(`first resend after ${o.gaps_ms[0]} ms, expected >= ${want.minGapMs}`);
  if (want.gapsWithin !== undefined && !(o.resend_gaps_ms && o.resend_gaps_ms[0] >= want.gapsWithin[0] && o.resend_gaps_ms[1] <= want.gapsWithin[1]))
    bad.push(`resend gaps ${JSON.stringify(o.resend_gaps_ms)} ms, expected within ${want.gapsWithin.join("-")}`);
  if (want.maxGapMs !== undefined && !(o.gaps_ms[0] <= want.maxGapMs)) bad.push(`first resend after ${o.gaps_ms[0]} ms, expected <= ${want.maxGapMs}`);
  return bad;
}

let serial = 0;

/**
 * Run one library's cases against a fresh fakegate. lib = {name, version,
 * default: adapter, configured: adapter, expect: {default: {scenario: want}, configured: {...}},
 * skip: {mode: [scenario]}, variants: [{label, scenario, adapter, want, note, windowMs}] (another setup
 * in one scenario), concurrency (cases at once; default all), extra: [{name, run(gate) -> {observation, client, problems, text}}]}.
 * An adapter is async (req, ctx) -> outcome string ("200", "503", "ECONNRESET", ...) where
 * ctx = {signal (aborted at the scenario's window), gate}. Returns {passed, failed}.
 */
export async function runLibrary(lib) {
  const gate = await start({ seed: 42, args: ["--journal-size", "100000"] });
  const results = { passed: 0, failed: 0 };
  const cases = [];   // thunks: started by the pool below, lib.concurrency at a time
  for (const mode of ["default", "configured"]) {
    for (const [id, sc] of Object.entries(SCENARIOS)) {
      if (lib.skip?.[mode]?.includes(id)) continue;
      cases.push(() => runCase(gate, lib, mode, id, sc));
    }
  }
  for (const v of lib.variants ?? []) cases.push(() => runCase(gate, lib, v.label, v.scenario, SCENARIOS[v.scenario], v));
  for (const x of lib.extra ?? []) cases.push(() => runExtra(gate, lib, x));
  const done = new Array(cases.length);
  let next = 0;
  const worker = async () => { while (next < cases.length) { const i = next++; done[i] = await cases[i](); } };
  await Promise.all(Array.from({ length: Math.min(lib.concurrency ?? cases.length, cases.length) }, worker));
  // Concurrent, each in its own tenant; printed in a fixed order once all have ended.
  for (const r of done) {
    console.log(r.line);
    results[r.ok ? "passed" : "failed"]++;
  }
  await gate.stop();
  return results;
}

async function runCase(gate, lib, mode, id, sc, variant) {
  const tenant = gate.tenant(`test_sk_${lib.slug}_${variant ? "v" + ++serial : mode}_${id}`);
  const adapter = variant ? variant.adapter : lib[mode];
  const run = randomUUID().slice(0, 8);
  await tenant.reset(sc.profile);
  const orderIds = Array.from({ length: sc.payments ?? 1 }, (_, i) => `order-${lib.slug}-${id}-${run}-${i}`);
  const ctl = new AbortController();
  const windowMs = variant?.windowMs ?? sc.windowMs;
  const timer = windowMs ? setTimeout(() => ctl.abort(new Error("window over")), windowMs) : null;
  let clients;
  try {
    clients = await Promise.all(orderIds.map((o) => adapter(confirmRequest(tenant, o), { signal: ctl.signal, gate: tenant })
      .catch((e) => "threw " + errorName(e))));
  } finally { if (timer) clearTimeout(timer); }
  const client = [...new Set(clients)].join("|");
  const o = await observe(tenant, orderIds);
  const want = variant ? variant.want : { ...(mode === "configured" ? CONFIGURED[id] : {}), ...(lib.expect?.[mode]?.[id] ?? {}) };
  return emit(lib, mode, sc.title, o, client, check(o, client, want), variant ? variant.note : lib.notes?.[mode]?.[id]);
}

async function runExtra(gate, lib, x) {
  const tenant = gate.tenant(`test_sk_${lib.slug}_extra_${++serial}`);
  await tenant.reset(x.profile ?? { name: "interop", routes: {} });
  let out;
  try { out = await x.run(tenant); } catch (e) { out = { observation: {}, client: "threw " + errorName(e), problems: [String(e.stack || e)] }; }
  return emit(lib, x.mode ?? "extra", x.name, out.observation, out.client, out.problems, out.note, out.text);
}

function emit(lib, mode, title, o, client, problems, note, text) {
  const ok = problems.length === 0;
  const line = `${ok ? "ok  " : "FAIL"} ${lib.name} ${lib.version} | ${mode} | ${title} | ${text ?? describe(o, client)}` +
    (ok ? "" : ` -- ${problems.join("; ")}`);
  if (process.env.INTEROP_RESULTS) {
    appendFileSync(process.env.INTEROP_RESULTS, JSON.stringify({ library: lib.name, version: lib.version, mode, scenario: title,
      ok, observation: o, client, problems, note: note ?? null, text: text ?? describe(o, client) }) + "\n");
  }
  return { ok, line };
}

/** For a program's last line: the Check-like summary the runner counts. */
export function summary({ passed, failed }) {
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
}

/** A correct retry loop around one attempt function (outcome -> classify): same request (so
 *  the same Idempotency-Key), at most `attempts` tries, Retry-After waited with jitter on top,
 *  full jitter otherwise; 4xx final. For libraries that do not retry themselves. */
export async function retrying(attempt, { attempts = 5, signal } = {}) {
  for (let n = 1; ; n++) {
    const o = await attempt();
    const c = classify(o);
    if (!c.retry || n >= attempts || signal?.aborted) return o.error ?? String(o.status);
    await new Promise((r) => setTimeout(r, c.afterMs ? c.afterMs + jitter(0, 500) : jitter(n)));
  }
}

/**
 * A circuit breaker's half-open state: open it with three failed confirms (500), wait
 * waitMs (past its half-open delay), then fire `herd` confirms at once while fakegate holds
 * each confirm 300 ms. fire(req) -> outcome. Counts, from the journal, how many of the herd
 * reached fakegate while the first of them (the probe) was still being processed.
 */
export function halfOpenCase({ name, fire, waitMs, herd = 10, want }) {
  return {
    name,
    profile: { name: "interop", routes: { confirm: { latency: { dist: "fixed", ms: 300 }, faults: [
      { kind: "error", p: 1, status: 500, code: "FAILED_INTERNAL_SYSTEM_PROCESSING", when: "before", times: 3 }] } } },
    run: async (gate) => {
      const run = randomUUID().slice(0, 8);
      for (let i = 0; i < 3; i++) await fire(confirmRequest(gate, `order-open-${run}-${i}`)).catch(() => {});
      await new Promise((r) => setTimeout(r, waitMs));
      const ids = Array.from({ length: herd }, (_, i) => `order-herd-${run}-${i}`);
      const outs = await Promise.all(ids.map((o) => fire(confirmRequest(gate, o)).catch((e) => errorName(e))));
      const arrivals = [];
      for (const o of ids) for (const r of await gate.requests({ orderId: o })) arrivals.push(Date.parse(r.arrived_at));
      arrivals.sort((a, b) => a - b);
      const during = arrivals.filter((t) => t < arrivals[0] + 300).length;
      const counts = {};
      for (const o of outs) counts[o] = (counts[o] ?? 0) + 1;
      const observation = { herd, reached: arrivals.length, during_probe: during, outcomes: counts };
      const problems = [];
      for (const [k, v] of Object.entries(want)) if (observation[k] !== v) problems.push(`${k} ${observation[k]}, expected ${v}`);
      const text = `${herd} calls at once when half-open: ${during} reached fakegate during the probe, ` +
        `${arrivals.length} in all; callers got ${Object.entries(counts).map(([k, v]) => `${v}x ${k}`).join(", ")}`;
      return { observation, client: Object.keys(counts).join("|"), problems, text };
    },
  };
}
