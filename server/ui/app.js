/* app.js -- the live page (docs/admin.md §5, GET /__admin/ui): polls fakegate's own admin
 * endpoints once a second and draws them with uPlot. Every request goes to the page's origin;
 * the admin token (if the server has one) comes from #token=... in the address or the form,
 * and the scope (a tenant) travels as X-Fakegate-Tenant. */
"use strict";

const CLASS_COLOURS = {
  ok: "#2e8540", replayed: "#6baed6", conflict: "#9467bd", "4xx": "#e6a100",
  "5xx": "#d62728", throttled: "#7f7f7f", capped: "#8c564b", dropped: "#111111",
};
const ROUTE_COLOURS = {
  confirm: "#1f77b4", cancel: "#ff7f0e", read: "#2ca02c", virtual_account: "#d62728",
  default: "#9467bd",
};
const PHASE_FILLS = ["rgba(31,119,180,0.07)", "rgba(255,127,14,0.09)", "rgba(44,160,44,0.08)",
                     "rgba(148,103,189,0.09)"];
const POLL_MS = 1000;
const FLIGHT_POINTS = 600;

const $ = (id) => document.getElementById(id);
const state = {
  token: "", scope: "", route: "all", seconds: 120, paused: false,
  timeline: null, flight: { t: [], byRoute: {} }, charts: {}, tick: 0,
  attemptsFor: null,
};

function headers() {
  const h = {};
  if (state.token) h["Authorization"] = "Bearer " + state.token;
  if (state.scope) h["X-Fakegate-Tenant"] = state.scope;
  return h;
}

async function getJSON(path) {
  const res = await fetch(path, { headers: headers(), cache: "no-store" });
  if (res.status === 401) {
    $("token-box").hidden = false;
    throw new Error("this server has an admin token: enter it above (or open the page as /__admin/ui#token=...)");
  }
  const body = await res.json();
  if (!res.ok) throw new Error(path + ": " + res.status + " " + (body.code || "") + " " + (body.message || ""));
  return body;
}

function showError(e) {
  const el = $("error");
  if (!e) { el.hidden = true; el.textContent = ""; return; }
  el.hidden = false;
  el.textContent = String(e.message || e);
}

function text(el, s) { el.textContent = s; return el; }
function cell(tr, s, tag) { const td = document.createElement(tag || "td"); text(td, s); tr.appendChild(td); return td; }
function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }
function hhmmss(ms) { return new Date(ms).toTimeString().slice(0, 8); }

/* ---- arrivals ------------------------------------------------------------------------ */

/* Per bucket, counts for the chosen route (or the sum of all routes) per class. */
function arrivalsOf(tl) {
  const classes = tl.classes;
  const rows = tl.buckets.map((b) => {
    const out = new Array(classes.length).fill(0);
    for (const [route, counts] of Object.entries(b.n)) {
      if (state.route !== "all" && route !== state.route) continue;
      counts.forEach((v, i) => { out[i] += v; });
    }
    return out;
  });
  return { classes, rows };
}

function drawBands(u) {
  const tl = state.timeline;
  if (!tl) return;
  const ctx = u.ctx;
  const top = u.bbox.top, height = u.bbox.height;
  const xAt = (t) => u.valToPos(t, "x", true);
  const halfW = Math.max(1, (xAt(1) - xAt(0)) / 2);
  let phaseIdx = -1, lastPhase;
  const names = [];
  ctx.save();
  tl.buckets.forEach((b) => {
    const x0 = xAt(b.t) - halfW, w = 2 * halfW;
    if (b.phase !== lastPhase) {
      lastPhase = b.phase;
      if (b.phase !== null) { phaseIdx++; names.push([x0, b.phase]); }
    }
    if (b.phase !== null && phaseIdx >= 0) {
      ctx.fillStyle = PHASE_FILLS[phaseIdx % PHASE_FILLS.length];
      ctx.fillRect(x0, top, w, height);
    }
    const closed = state.route === "all" ? b.throttled.length > 0 : b.throttled.includes(state.route);
    if (closed) {
      ctx.fillStyle = "rgba(90,90,90,0.22)";
      ctx.fillRect(x0, top, w, height);
    }
  });
  ctx.fillStyle = "#333";
  ctx.font = Math.round(11 * devicePixelRatio) + "px sans-serif";
  for (const [x, name] of names) ctx.fillText(name, x + 3, top + 12 * devicePixelRatio);
  ctx.restore();
}

function makeArrivals(classes) {
  const series = [{ label: "time" }];
  for (const c of classes) {
    series.push({
      label: c, stroke: CLASS_COLOURS[c], fill: CLASS_COLOURS[c], width: 0, /* opaque: stacked bars overlap */
      paths: uPlot.paths.bars({ size: [0.9, 40] }),
      value: (u, v, si, i) => (i == null || !state.arrivalsRaw ? v : state.arrivalsRaw[si - 1][i]),
    });
  }
  const opts = {
    width: Math.max(480, $("arrivals").clientWidth || 900), height: 260,
    series, scales: { x: { time: true } },
    axes: [{}, { label: "requests / s", size: 56 }],
    hooks: { drawClear: [drawBands] },
    cursor: { drag: { x: false } },
  };
  return new uPlot(opts, [[]].concat(classes.map(() => [])), $("arrivals"));
}

function renderArrivals(tl) {
  const { classes, rows } = arrivalsOf(tl);
  if (!state.charts.arrivals) state.charts.arrivals = makeArrivals(classes);
  const xs = tl.buckets.map((b) => b.t);
  /* Stacked bars: series k is drawn at the sum of classes k..end, the first on top. */
  const raw = classes.map((_, k) => rows.map((r) => r[k]));
  const stacked = classes.map((_, k) => rows.map((r) => r.slice(k).reduce((a, v) => a + v, 0)));
  state.arrivalsRaw = raw;
  state.charts.arrivals.setData([xs].concat(stacked));

  const totals = classes.map((_, k) => raw[k].reduce((a, v) => a + v, 0));
  const all = totals.reduce((a, v) => a + v, 0);
  const ul = $("totals");
  clear(ul);
  classes.forEach((c, k) => {
    const li = document.createElement("li");
    li.dataset.class = c;
    const sw = document.createElement("span");
    sw.className = "sw";
    sw.style.background = CLASS_COLOURS[c];
    sw.setAttribute("aria-hidden", "true");
    li.appendChild(sw);
    li.appendChild(document.createTextNode(c + ": "));
    const n = document.createElement("strong");
    n.className = "n";
    text(n, String(totals[k]));
    li.appendChild(n);
    ul.appendChild(li);
  });
  const closedS = tl.buckets.filter((b) => (state.route === "all" ? b.throttled.length : b.throttled.includes(state.route))).length;
  const phases = [...new Set(tl.buckets.map((b) => b.phase).filter((p) => p !== null))];
  const last = rows.length ? rows[rows.length - 1].reduce((a, v) => a + v, 0) : 0;
  text($("arrivals-summary"),
    `${all} requests on ${state.route === "all" ? "all routes" : "route " + state.route} in the last ` +
    `${tl.seconds} s (${classes.map((c, k) => totals[k] ? c + " " + totals[k] : null).filter(Boolean).join(", ") || "none"}); ` +
    `${last} in the last second; a throttle window was closed for ${closedS} s` +
    (phases.length ? `; schedule phases: ${phases.join(", ")}` : "") + ".");

  const table = $("arrivals-table");
  const thead = table.tHead, tbody = table.tBodies[0];
  clear(thead); clear(tbody);
  const hr = document.createElement("tr");
  cell(hr, "second", "th");
  classes.forEach((c) => cell(hr, c, "th"));
  cell(hr, "throttle window", "th");
  cell(hr, "phase", "th");
  thead.appendChild(hr);
  const from = Math.max(0, rows.length - 15);
  for (let i = rows.length - 1; i >= from; i--) {
    const tr = document.createElement("tr");
    const b = tl.buckets[i];
    cell(tr, hhmmss(b.t * 1000));
    rows[i].forEach((v) => cell(tr, String(v)));
    cell(tr, b.throttled.length ? b.throttled.join(" ") : "–");
    cell(tr, b.phase === null ? "–" : b.phase);
    tbody.appendChild(tr);
  }
}

/* ---- in flight ------------------------------------------------------------------------ */

function renderFlight(tl) {
  const f = state.flight;
  f.t.push(tl.now_ms / 1000);
  for (const r of tl.in_flight) {
    if (!f.byRoute[r.route]) f.byRoute[r.route] = { now: new Array(f.t.length - 1).fill(null), cap: r.cap };
    f.byRoute[r.route].now.push(r.now);
    f.byRoute[r.route].cap = r.cap;
  }
  if (f.t.length > FLIGHT_POINTS) {
    f.t.shift();
    for (const v of Object.values(f.byRoute)) v.now.shift();
  }
  const routes = tl.in_flight.map((r) => r.route);
  if (!state.charts.flight) {
    const series = [{ label: "time" }];
    for (const r of routes) series.push({ label: r, stroke: ROUTE_COLOURS[r] || "#333", width: 2 });
    for (const r of routes) series.push({ label: r + " cap", stroke: ROUTE_COLOURS[r] || "#333", dash: [6, 4], width: 1 });
    state.charts.flight = new uPlot({
      width: Math.max(480, $("flight").clientWidth || 900), height: 220, series,
      scales: { x: { time: true } }, axes: [{}, { label: "requests", size: 56 }],
    }, [[]].concat(series.slice(1).map(() => [])), $("flight"));
  }
  const data = [f.t.slice()];
  for (const r of routes) data.push(f.byRoute[r].now.slice());
  for (const r of routes) data.push(f.t.map(() => f.byRoute[r].cap));
  state.charts.flight.setData(data);

  const tbody = $("flight-table").tBodies[0];
  clear(tbody);
  const parts = [];
  for (const r of tl.in_flight) {
    const tr = document.createElement("tr");
    tr.dataset.route = r.route;
    cell(tr, r.route, "th").setAttribute("scope", "row");
    cell(tr, String(r.now)).className = "now";
    cell(tr, String(r.peak));
    cell(tr, r.cap === null ? "none" : String(r.cap));
    tbody.appendChild(tr);
    parts.push(`${r.route} ${r.now}${r.cap === null ? "" : " of " + r.cap}`);
  }
  text($("flight-summary"), "In flight now: " + parts.join(", ") + ".");
}

/* ---- report and attempts ---------------------------------------------------------------- */

/* An orderId's attempts: those that carried it, and those refused before their body was read
 * (a throttle, a cap) that carried one of their Idempotency-Keys, in arrival order. */
async function attemptsOf(orderId) {
  const byOrder = (await getJSON("/__admin/requests?orderId=" + encodeURIComponent(orderId) + "&limit=200")).requests;
  const keys = [...new Set(byOrder.map((q) => q.idempotency_key).filter((k) => k !== null))];
  const all = new Map(byOrder.map((q) => [q.id, q]));
  for (const k of keys) {
    const more = (await getJSON("/__admin/requests?idempotencyKey=" + encodeURIComponent(k) + "&limit=200")).requests;
    for (const q of more) all.set(q.id, q);
  }
  return [...all.values()].sort((a, b) => a.id - b.id);
}

async function showAttempts(orderId) {
  state.attemptsFor = orderId;
  const list = await attemptsOf(orderId);
  $("attempts-box").hidden = false;
  text($("attempts-title"), `Attempts of orderId ${orderId}, in order (${list.length})`);
  const tbody = $("attempts").tBodies[0];
  clear(tbody);
  for (const q of list) {
    const tr = document.createElement("tr");
    cell(tr, String(q.id));
    cell(tr, q.arrived_at.replace("T", " ").replace("Z", ""));
    cell(tr, q.route);
    cell(tr, String(q.attempt));
    cell(tr, q.idempotency_key === null ? "–" : q.idempotency_key);
    const d = q.decision;
    cell(tr, d ? (d.fault !== "none" ? d.fault : "latency " + d.latency_ms.toFixed(0) + " ms") : "–");
    cell(tr, q.status === null ? "–" : String(q.status) + (q.code ? " " + q.code : ""));
    cell(tr, q.outcome === null ? "pending" : q.outcome);
    cell(tr, q.duration_ms === null ? "–" : q.duration_ms.toFixed(1));
    tbody.appendChild(tr);
  }
}

function renderReport(rep) {
  text($("report-meta"), `${rep.judged_requests} requests judged since ${rep.since}` +
    (rep.complete ? "" : " (identity table full: some requests not judged)"));
  const ul = $("findings");
  clear(ul);
  if (!rep.findings.length) {
    text(ul.appendChild(document.createElement("li")), "No findings: nothing in the traffic so far breaks a retry rule.");
    return;
  }
  for (const f of rep.findings) {
    const li = document.createElement("li");
    li.dataset.kind = f.kind;
    const b = document.createElement("strong");
    text(b, f.kind);
    li.appendChild(b);
    li.appendChild(document.createTextNode(` × ${f.count}: ${f.rule}. Examples: `));
    for (const oid of f.examples) {
      const btn = document.createElement("button");
      btn.type = "button";
      text(btn, oid);
      btn.setAttribute("aria-label", `show the attempts of orderId ${oid}`);
      btn.addEventListener("click", () => showAttempts(oid).catch(showError));
      li.appendChild(btn);
    }
    ul.appendChild(li);
  }
}

/* ---- webhook deliveries ------------------------------------------------------------------ */

function renderDeliveries(j) {
  const tbody = $("deliveries").tBodies[0];
  clear(tbody);
  $("deliveries-empty").hidden = j.deliveries.length > 0;
  for (const d of j.deliveries.slice().reverse()) {
    const tr = document.createElement("tr");
    cell(tr, String(d.id));
    cell(tr, d.event_type + (d.duplicate_of ? " (duplicate of " + d.duplicate_of + ")" : ""));
    cell(tr, d.order_id);
    cell(tr, d.status);
    cell(tr, String(d.attempts.length));
    const a = d.attempts[d.attempts.length - 1];
    cell(tr, !a ? "–" : a.http_status !== null ? String(a.http_status) : a.error || (a.duration_ms === null ? "in flight" : "–"));
    cell(tr, d.next_attempt_at || "–");
    tbody.appendChild(tr);
  }
}

/* ---- the loop ----------------------------------------------------------------------------- */

function renderStatus(tl) {
  text($("profile-name"), tl.profile.name);
  text($("seed"), tl.profile.seed);
  text($("phase"), tl.profile.phase === null ? "–" : tl.profile.phase);
  text($("updated"), hhmmss(tl.now_ms));
  const sel = $("scope");
  if (tl.tenants) {
    const have = new Set([...sel.options].map((o) => o.value));
    for (const k of tl.tenants) {
      if (have.has(k)) continue;
      const o = document.createElement("option");
      o.value = k;
      text(o, "tenant " + k);
      sel.appendChild(o);
    }
  }
}

async function poll() {
  if (state.paused) return;
  try {
    const tl = await getJSON("/__admin/timeline?seconds=" + state.seconds);
    state.timeline = tl;
    renderStatus(tl);
    renderArrivals(tl);
    renderFlight(tl);
    if (state.tick % 2 === 0) {
      renderReport(await getJSON("/__admin/report"));
      renderDeliveries(await getJSON("/__admin/webhooks/deliveries?limit=20"));
      if (state.attemptsFor) await showAttempts(state.attemptsFor);
    }
    state.tick++;
    showError(null);
  } catch (e) {
    showError(e);
  }
}

function resetCharts() {
  for (const c of Object.values(state.charts)) c.destroy();
  state.charts = {};
  state.flight = { t: [], byRoute: {} };
}

function start() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  state.token = m ? decodeURIComponent(m[1]) : sessionStorage.getItem("fakegate-token") || "";
  $("scope").addEventListener("change", (e) => { state.scope = e.target.value; state.attemptsFor = null; $("attempts-box").hidden = true; resetCharts(); poll(); });
  $("route").addEventListener("change", (e) => { state.route = e.target.value; if (state.timeline) renderArrivals(state.timeline); });
  $("window").addEventListener("change", (e) => { state.seconds = Number(e.target.value); poll(); });
  $("pause").addEventListener("click", (e) => {
    state.paused = !state.paused;
    e.target.setAttribute("aria-pressed", String(state.paused));
    text(e.target, state.paused ? "Resume" : "Pause");
  });
  $("token-save").addEventListener("click", () => {
    state.token = $("token").value;
    sessionStorage.setItem("fakegate-token", state.token);
    $("token-box").hidden = true;
    poll();
  });
  poll();
  setInterval(poll, POLL_MS);
}

start();
