"""The interop suite's scenarios for Python clients (docs/interop.md), on the fakegate pytest
plugin (clients/python): each test gets the `fakegate` fixture -- this xdist worker's tenant of
a server started for its module, reset -- sets a scenario's profile, lets the library confirm
one payment (six at once for the burst) and judges the case from what fakegate saw: arrivals
in the journal, keys and charges in the ledger, findings in the report. Each case prints one
line ("ok   ..." / "FAIL ...", the same shape as the Node programs') and is appended to
$INTEROP_RESULTS as JSON for the README table. The same scenarios as node/harness.mjs.
"""

import json
import os
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest

CLIENT_TIMEOUT_S = 2.0     # every client's own timeout (harness.mjs: CLIENT_TIMEOUT_MS)
RETRY_AFTER_S = 2
HANG_MS = 4000
BURST = 6


def _fault(f):
    return {"name": "interop", "routes": {"confirm": {"faults": [f]}}}


SCENARIOS = {
    "lost": ("response lost (reset after commit)",
             _fault({"kind": "drop_response", "p": 1, "how": "reset", "attempts": [1]}), 1),
    "ra503": ("503 + Retry-After: %d" % RETRY_AFTER_S,
              _fault({"kind": "error", "p": 1, "status": 503, "code": "SERVICE_UNAVAILABLE", "when": "before",
                      "retry_after": {"format": "seconds", "value": RETRY_AFTER_S}, "attempts": [1]}), 1),
    "ra_frac": ("503 + Retry-After: 2.5",
                _fault({"kind": "error", "p": 1, "status": 503, "code": "SERVICE_UNAVAILABLE", "when": "before",
                        "retry_after": {"format": "raw", "value": "2.5"}, "attempts": [1]}), 1),
    "ra_neg": ("503 + Retry-After: -1",
               _fault({"kind": "error", "p": 1, "status": 503, "code": "SERVICE_UNAVAILABLE", "when": "before",
                       "retry_after": {"format": "raw", "value": "-1"}, "attempts": [1]}), 1),
    "timeout": ("timeout (answer held %d ms after commit, client %d ms)" % (HANG_MS, CLIENT_TIMEOUT_S * 1000),
                _fault({"kind": "drop_response", "p": 1, "how": "hang", "hang_ms": HANG_MS, "attempts": [1]}), 1),
    "r4xx": ("400 on every attempt",
             _fault({"kind": "error", "p": 1, "status": 400, "code": "INVALID_CARD_NUMBER", "when": "before"}), 1),
    "burst": ("%d payments get 500 at once" % BURST,
              _fault({"kind": "error", "p": 1, "status": 500, "code": "FAILED_INTERNAL_SYSTEM_PROCESSING",
                      "when": "before", "attempts": [1]}), BURST),
}

# What a correctly configured client shows (node/harness.mjs: CONFIGURED).
CONFIGURED = {
    "lost": {"arrivals": 2, "keys": 1, "charges": 1, "findings": [], "client": "200"},
    "ra503": {"arrivals": 2, "keys": 1, "charges": 1, "findings": [], "client": "200", "min_gap_ms": RETRY_AFTER_S * 1000 - 50},
    "ra_frac": {"arrivals": 2, "keys": 1, "charges": 1, "findings": [], "client": "200"},
    "ra_neg": {"arrivals": 2, "keys": 1, "charges": 1, "findings": [], "client": "200"},
    "timeout": {"arrivals": 2, "keys": 1, "charges": 1, "findings": [], "client": "200"},
    "r4xx": {"arrivals": 1, "charges": 0, "findings": [], "client": "400"},
    "burst": {"charges": BURST, "findings": [], "client": "200", "every_arrivals": 2},
}


class Req:
    """One confirm: url, headers (with this tenant's key and the Idempotency-Key), body."""

    def __init__(self, gate, order_id, key=None):
        self.order_id = order_id
        self.key = key or "idem-" + order_id
        self.url = gate.url + "/v1/payments/confirm"
        self.body = json.dumps({"paymentKey": "pk_" + order_id, "orderId": order_id, "amount": 15000})
        self.headers = {**gate.headers, "Content-Type": "application/json", "Idempotency-Key": self.key}


def retry_after_s(value):
    """A Retry-After value in seconds (digits only), or None."""
    try:
        return max(0.0, float(value)) if value not in (None, "") else None
    except ValueError:
        return None


def full_jitter(n, base_s=0.5, cap_s=4.0):
    """Uniform in [0, min(cap, base * 2^n)) (harness.mjs: jitter, and why 0.5 s)."""
    return random.uniform(0, min(cap_s, base_s * 2 ** n))


def _t(r):
    return datetime.strptime(r["arrived_at"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def observe(gate, order_ids):
    per = []
    for o in order_ids:
        reqs = [r for r in gate.requests(order_id=o) if r["route"] == "confirm"]
        per.append((reqs, gate.payment(o)))
    first = per[0][0]
    gaps = [round((_t(b) - _t(a)) * 1000) for a, b in zip(first, first[1:])]
    resent = [reqs for reqs, _ in per if len(reqs) > 1]
    firsts = [round((_t(r[1]) - _t(r[0])) * 1000) for r in resent]
    seconds = [_t(r[1]) for r in resent]
    return {
        "arrivals": len(first),
        "arrivals_each": [len(reqs) for reqs, _ in per],
        "keys": len({r["idempotency_key"] for r in first}),
        "gaps_ms": gaps,
        "outcomes": [r["outcome"] or "pending" for r in first],
        "charges": sum((l or {}).get("charges", 0) for _, l in per),
        "status": (per[0][1] or {}).get("payment", {}).get("status"),
        "resend_spread_ms": round((max(seconds) - min(seconds)) * 1000) if len(seconds) > 1 else None,
        "resend_gaps_ms": [min(firsts), max(firsts)] if len(firsts) > 1 else None,
        "findings": [f["kind"] for f in gate.report()["findings"]],
    }


def describe(o, client):
    n = o["arrivals"]
    parts = ["%d arrival%s" % (n, "" if n == 1 else "s")]
    if len(o["arrivals_each"]) > 1:
        parts[0] = "arrivals " + "/".join(map(str, o["arrivals_each"]))
    elif o["gaps_ms"]:
        g = o["gaps_ms"]
        parts.append("gaps %s%s ms" % (",".join(map(str, g[:4])), ",..." if len(g) > 4 else ""))
    if n > 1 and o["keys"] != 1:
        parts.append("%d keys" % o["keys"])
    if o["resend_spread_ms"] is not None:
        parts.append("resends spread %d ms, each %d-%d ms after its failure" % (o["resend_spread_ms"], *o["resend_gaps_ms"]))
    parts += ["client: %s" % client, "charged %d" % o["charges"],
              "report: %s" % (",".join(o["findings"]) or "none")]
    return ", ".join(parts)


def check(o, client, want):
    bad = []
    a = want.get("arrivals")
    if isinstance(a, tuple):
        if not a[0] <= o["arrivals"] <= a[1]:
            bad.append("arrivals %d, expected %d-%d" % (o["arrivals"], *a))
    elif a is not None and o["arrivals"] != a:
        bad.append("arrivals %d, expected %d" % (o["arrivals"], a))
    if "every_arrivals" in want and any(n != want["every_arrivals"] for n in o["arrivals_each"]):
        bad.append("arrivals %s, expected %d each" % (o["arrivals_each"], want["every_arrivals"]))
    if "keys" in want and o["arrivals"] > 1 and o["keys"] != want["keys"]:
        bad.append("keys %d, expected %d" % (o["keys"], want["keys"]))
    if "charges" in want and o["charges"] != want["charges"]:
        bad.append("charges %d, expected %d" % (o["charges"], want["charges"]))
    if want.get("findings") is not None and sorted(o["findings"]) != sorted(want["findings"]):
        bad.append("findings %s, expected %s" % (o["findings"], want["findings"]))
    if "has_finding" in want and want["has_finding"] not in o["findings"]:
        bad.append("no %s finding" % want["has_finding"])
    if "client" in want and not str(client).startswith(want["client"]):
        bad.append("client %s, expected %s" % (client, want["client"]))
    if "min_gap_ms" in want and not (o["gaps_ms"] and o["gaps_ms"][0] >= want["min_gap_ms"]):
        bad.append("first resend after %s ms, expected >= %d" % (o["gaps_ms"][:1], want["min_gap_ms"]))
    if "max_gap_ms" in want and not (o["gaps_ms"] and o["gaps_ms"][0] <= want["max_gap_ms"]):
        bad.append("first resend after %s ms, expected <= %d" % (o["gaps_ms"][:1], want["max_gap_ms"]))
    if "gaps_within" in want:
        g, (lo, hi) = o["resend_gaps_ms"], want["gaps_within"]
        if not (g and lo <= g[0] and g[1] <= hi):
            bad.append("resend gaps %s ms, expected within %d-%d" % (g, lo, hi))
    return bad


class Interop:
    """run(mode, scenario, send, want) for one library; send(req) -> outcome string."""

    def __init__(self, gate, node, library, version):
        self.gate, self.node, self.library, self.version = gate, node, library, version

    def run(self, mode, scenario, send, want=None):
        title, profile, payments = SCENARIOS[scenario]
        self.gate.set_profile(profile)
        run = uuid.uuid4().hex[:8]
        slug = self.library.split()[0].lower().replace("-", "")
        order_ids = ["order-%s-%s-%s-%d" % (slug, scenario, run, i) for i in range(payments)]
        with ThreadPoolExecutor(payments) as pool:
            outs = list(pool.map(lambda o: _outcome(send, Req(self.gate, o)), order_ids))
        client = "|".join(dict.fromkeys(outs))
        o = observe(self.gate, order_ids)
        full = {**(CONFIGURED[scenario] if mode == "configured" else {}), **(want or {})}
        problems = check(o, client, full)
        text = describe(o, client)
        ok = not problems
        line = "%s %s %s | %s | %s | %s" % ("ok  " if ok else "FAIL", self.library, self.version, mode, title, text)
        if problems:
            line += " -- " + "; ".join(problems)
        self.node.user_properties.append(("interop_line", line))
        path = os.environ.get("INTEROP_RESULTS")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"library": self.library, "version": self.version, "mode": mode, "scenario": title,
                                    "ok": ok, "observation": o, "client": client, "problems": problems,
                                    "note": None, "text": text}) + "\n")
        assert ok, "; ".join(problems)
        return o


def _outcome(send, req):
    try:
        return str(send(req))
    except Exception as e:   # the client's own error is an outcome too
        return type(e).__name__


@pytest.fixture
def interop(fakegate, request):
    mod = request.module
    return Interop(fakegate, request.node, mod.LIBRARY, mod.VERSION)


_terminal = None


def pytest_configure(config):
    global _terminal
    _terminal = config.pluginmanager.get_plugin("terminalreporter")


def _say(line):
    if _terminal is not None:
        _terminal.write_line(line, flush=True)
    else:
        print(line, flush=True)


def pytest_runtest_logreport(report):
    """One line per case, in the Node programs' shape (also under xdist, on the controller)."""
    line = dict(report.user_properties).get("interop_line")
    if report.when == "call" and line:
        _say(line if report.passed or line.startswith("FAIL") else "FAIL" + line[4:])
    elif report.failed and not line:
        _say("FAIL %s | %s" % (report.nodeid, str(report.longrepr).strip().splitlines()[-1][:300]))
