// live-page.test.mjs -- the live page (GET /__admin/ui, docs/admin.md §5) in headless Chromium:
// starts fakegate on port 0 with a profile whose confirm route is throttled by a window for
// the first 2 s of every 4 s and holds each confirm 600 ms; drives a burst of eight confirms
// into the closed window and resends all eight at the same instant after it opens (the
// synchronized retries a client without jitter makes), and keeps confirms in flight; then
// opens the page and checks that the timeline shows the throttled arrivals and the shaded
// window, the in-flight figure moves, the report panel lists synchronized_retries and an
// example opens its attempts in order, that every control is reachable by keyboard, that the
// charts have text alternatives, and that the page asked nothing of any other origin. Saves a
// screenshot as build/ui-test/live-page.png. Prints a Check-style summary line.
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { mkdtempSync, readFileSync, existsSync, writeFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = process.env.UI_TEST_DIR;
const require = createRequire(join(dir, "package.json"));
const { chromium } = require("playwright-core");

const checks = [];
function check(name, ok, detail) {
  checks.push({ name, ok: !!ok, detail });
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? ": " + detail : ""}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const PROFILE = {
  name: "ui_test",
  routes: {
    confirm: {
      latency: { dist: "fixed", ms: 600 },
      throttle: { kind: "window", period_s: 4, throttled_s: 2 },
    },
  },
};

async function startServer(work) {
  const portFile = join(work, "port");
  const profile = join(work, "profile.json");
  writeFileSync(profile, JSON.stringify(PROFILE));
  const child = spawn(process.env.FAKEGATE_BIN,
    ["--port", "0", "--port-file", portFile, "--quiet", "--profile", profile, "--seed", "7"],
    { stdio: ["ignore", "ignore", "inherit"] });
  for (let i = 0; i < 500; i++) {   // the port file is the readiness signal, 10 s at most
    if (existsSync(portFile)) {
      const port = readFileSync(portFile, "utf8").trim();
      if (port) return { child, base: `http://127.0.0.1:${port}` };
    }
    await sleep(20);
  }
  child.kill("SIGKILL");
  throw new Error("fakegate did not write its port file within 10 s");
}

const AUTH = "Basic " + Buffer.from("test_sk_ui:").toString("base64");
function confirm(base, n) {
  return fetch(base + "/v1/payments/confirm", {
    method: "POST",
    // The key is the identity the report pairs a throttled attempt with its resend by (a
    // throttle refuses on the headers, before any body is read).
    headers: { Authorization: AUTH, "Content-Type": "application/json", "Idempotency-Key": `ui-${n}` },
    body: JSON.stringify({ paymentKey: `pk_ui_${n}`, orderId: `order-ui-${n}`, amount: 1000 }),
  }).then((r) => r.status);
}

// The same confirms, each on its own connection opened beforehand, the requests written in
// one loop: they reach fakegate within a millisecond or two, however slow the server build
// (the report calls resends "synchronized" when more than half fall in one 10 ms window).
async function confirmBurst(base, ns) {
  const { hostname, port } = new URL(base);
  const socks = await Promise.all(ns.map(() => new Promise((ok, fail) => {
    const s = connect({ host: hostname, port: Number(port) }, () => ok(s));
    s.on("error", fail);
  })));
  const answers = socks.map((s) => new Promise((ok) => {
    let got = "";
    s.on("data", (d) => { got += d; });
    s.on("close", () => ok(Number((/^HTTP\/1\.1 (\d{3})/.exec(got) || [0, 0])[1])));
  }));
  socks.forEach((s, i) => {
    const n = ns[i];
    const body = JSON.stringify({ paymentKey: `pk_ui_${n}`, orderId: `order-ui-${n}`, amount: 1000 });
    s.write(`POST /v1/payments/confirm HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: ${AUTH}\r\n` +
      `Content-Type: application/json\r\nIdempotency-Key: ui-${n}\r\nConnection: close\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
  return Promise.all(answers);
}

// Wait (bounded) until fn() is truthy in the page; its last value.
async function until(page, fn, arg, ms) {
  try {
    const h = await page.waitForFunction(fn, arg, { timeout: ms, polling: 100 });
    return await h.jsonValue();
  } catch {
    return null;
  }
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), "fakegate-ui-"));
  const { child, base } = await startServer(work);
  let browser;
  try {
    // Re-apply the profile so the window's phase is known: closed for [t0, t0 + 2 s).
    const put = await fetch(base + "/__admin/profile", { method: "PUT", body: JSON.stringify(PROFILE) });
    check("PUT /__admin/profile", put.status === 200, String(put.status));
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    const burst = await confirmBurst(base, ids);
    check("a burst into the closed window is throttled", burst.every((s) => s === 503), burst.join(" "));
    await sleep(2300); // open now: everyone resends at the same instant, as no jitter does
    const resent = await confirmBurst(base, ids);
    check("the synchronized resends succeed", resent.every((s) => s === 200), resent.join(" "));
    const report = await (await fetch(base + "/__admin/report")).json();
    check("the report finds synchronized_retries",
      report.findings.some((f) => f.kind === "synchronized_retries"),
      report.findings.map((f) => f.kind).join(" "));

    // Keep confirms in flight (600 ms each, some throttled) while the page watches.
    let n = 100, stop = false;
    const load = (async () => {
      while (!stop) {
        await Promise.all([0, 1, 2, 3].map(() => confirm(base, n++)));
        await sleep(150);
      }
    })();

    browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
    const page = await browser.newPage({ viewport: { width: 1200, height: 1600 } });
    const foreign = [], errors = [];
    page.on("request", (q) => { if (!q.url().startsWith(base + "/")) foreign.push(q.url()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    await page.goto(base + "/__admin/ui", { waitUntil: "load" });

    const throttled = await until(page, () => {
      const el = document.querySelector('#totals li[data-class="throttled"] .n');
      return el && Number(el.textContent) >= 6 ? Number(el.textContent) : null;
    }, null, 8000);
    check("the timeline counts the throttled arrivals", throttled >= 6, String(throttled));
    const ok = await page.$eval('#totals li[data-class="ok"] .n', (e) => Number(e.textContent));
    check("and the successful ones", ok >= 6, String(ok));
    const shaded = await page.$$eval("#arrivals-table tbody tr",
      (rows) => rows.filter((r) => r.cells[r.cells.length - 2].textContent.includes("confirm")).length);
    check("a closed throttle window is marked in the seconds table", shaded > 0, String(shaded));
    const canvas = await page.$("#arrivals canvas");
    check("the arrivals chart is drawn", !!canvas);

    const seen = new Set();
    for (let i = 0; i < 30 && seen.size < 2; i++) {
      const v = await page.$eval('#flight-table tr[data-route="confirm"] .now', (e) => e.textContent);
      seen.add(v);
      await sleep(250);
    }
    check("the in-flight figure moves", seen.size >= 2, [...seen].join(" → "));
    const flightPoints = await page.evaluate(() => state.flight.t.length);
    check("the in-flight chart keeps a series", flightPoints >= 2, String(flightPoints));

    const finding = await until(page, () =>
      document.querySelector('#findings li[data-kind="synchronized_retries"]') ? true : null, null, 8000);
    check("the report panel lists synchronized_retries", finding);

    // Keyboard: Tab from the top reaches an example button; Enter opens its attempts.
    await page.focus("#scope");
    let reached = null;
    for (let i = 0; i < 60 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await page.evaluate(() => {
        const a = document.activeElement;
        return a && a.closest('#findings li[data-kind="synchronized_retries"]') && a.tagName === "BUTTON" ? a.textContent : null;
      });
    }
    check("Tab reaches an example orderId of the finding", !!reached, reached);
    if (reached) {
      await page.keyboard.press("Enter");
      const rows = await until(page, () => {
        const r = document.querySelectorAll("#attempts tbody tr");
        return r.length >= 2 ? r.length : null;
      }, null, 5000);
      check("Enter lists that orderId's attempts", rows >= 2, String(rows));
      const codes = await page.$$eval("#attempts tbody tr", (rs) => rs.map((r) => r.cells[6].textContent));
      check("in order: throttled first, then approved",
        codes.length >= 2 && codes[0].startsWith("503") && codes[codes.length - 1].startsWith("200"), codes.join(" | "));
    }

    const alt = await page.evaluate(() => ["arrivals", "flight"].map((id) => {
      const el = document.getElementById(id);
      const cap = document.getElementById(el.getAttribute("aria-describedby"));
      return el.getAttribute("role") === "img" && cap && cap.textContent.length > 20;
    }));
    check("each chart has a text alternative", alt.every(Boolean), JSON.stringify(alt));
    const summary = await page.$eval("#arrivals-summary", (e) => e.textContent);
    check("the arrivals caption names the throttling", /throttled \d+/.test(summary) && /closed for [1-9]/.test(summary), summary);

    await page.screenshot({ path: join(dir, "live-page.png"), fullPage: true });
    check("a screenshot is saved", existsSync(join(dir, "live-page.png")), join(dir, "live-page.png"));
    // Scoped to the tenant whose key the clients use: its timeline counts from now on.
    await page.selectOption("#scope", "test_sk_ui");
    const scoped = await until(page, () => {
      const n = document.querySelector('#totals li[data-class="throttled"] .n, #totals li[data-class="ok"] .n');
      const tl = state.timeline;
      return tl && tl.tenant === "test_sk_ui" && n ? tl.tenant : null;
    }, null, 8000);
    check("the scope selector shows one tenant", scoped === "test_sk_ui", String(scoped));

    check("no request left fakegate's origin", foreign.length === 0, foreign.join(" "));
    check("no script error", errors.length === 0, errors.join(" | "));
    stop = true;
    await load;
  } finally {
    if (browser) await browser.close();
    child.kill("SIGTERM");
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (e) {
  check("the test ran to its end", false, String(e && e.stack || e));
}
const failed = checks.filter((c) => !c.ok).length;
console.log(`${Math.floor(100 * (checks.length - failed) / Math.max(1, checks.length))}%: Checks: ${checks.length}, Failures: ${failed}, Errors: 0`);
process.exit(failed ? 1 : 0);
