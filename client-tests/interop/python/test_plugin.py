"""The pytest plugin itself (clients/python): the fixture, the helpers, and one tenant per
xdist worker on a shared server. Each test records one interop line."""
import base64
import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from importlib.metadata import version

import pytest

import fakegate as fg
from fakegate.plugin import worker_key

LIBRARY = "pytest-fakegate"
VERSION = version("pytest-fakegate")


def line(request, text):
    request.node.user_properties.append(("interop_line", "ok   %s %s | plugin | %s" % (LIBRARY, VERSION, text)))


def confirm(gate, order_id, key):
    body = json.dumps({"paymentKey": "pk_" + order_id, "orderId": order_id, "amount": 15000}).encode()
    req = urllib.request.Request(gate.url + "/v1/payments/confirm", data=body, method="POST",
                                 headers={**gate.headers, "Content-Type": "application/json", "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_fixture_is_this_workers_tenant_and_starts_empty(fakegate, request):
    assert fakegate.secret_key == worker_key()
    assert fakegate.auth == "Basic " + base64.b64encode((worker_key() + ":").encode()).decode()
    assert fakegate.payments() == [] and fakegate.requests() == []
    assert confirm(fakegate, "order-plugin-1", "k-plugin-1") == 200
    assert fakegate.payment("order-plugin-1")["charges"] == 1
    assert [r["attempt"] for r in fakegate.requests(order_id="order-plugin-1")] == [1]
    line(request, "fakegate fixture: tenant %s, empty at start, ledger and journal read back" % fakegate.secret_key)


def test_set_profile_and_reset_do_not_leak(fakegate, request):
    fakegate.set_profile({"name": "t", "routes": {"confirm": {"faults": [
        {"kind": "error", "p": 1, "status": 400, "code": "INVALID_CARD_NUMBER", "when": "before"}]}}})
    assert confirm(fakegate, "order-plugin-2", "k-plugin-2") == 400
    fakegate.reset()
    assert fakegate.payments() == [] and fakegate.report()["judged_requests"] == 0
    line(request, "set_profile for one test, reset empties the tenant")


def test_previous_tests_profile_is_gone(fakegate, request):
    assert confirm(fakegate, "order-plugin-3", "k-plugin-3") == 200   # the 400 profile did not leak
    line(request, "the next test gets the server's profile back")


def test_assert_no_findings_names_the_finding(fakegate, request):
    fakegate.set_profile({"name": "t", "routes": {"confirm": {"faults": [
        {"kind": "error", "p": 1, "status": 400, "code": "INVALID_CARD_NUMBER", "when": "before"}]}}})
    confirm(fakegate, "order-plugin-4", "k-plugin-4")
    confirm(fakegate, "order-plugin-4", "k-plugin-4")                   # a 4xx resent: retried_4xx
    with pytest.raises(fg.FakegateError, match="retried_4xx"):
        fakegate.assert_no_findings()
    line(request, "assert_no_findings raises, naming retried_4xx and order-plugin-4")


def test_clock_advance(fakegate, request):
    before = fakegate.clock.now()["offset_s"]
    assert fakegate.clock.advance(90)["offset_s"] >= before + 90
    line(request, "clock.advance(90) moves the gateway clock")


def test_one_tenant_per_xdist_worker_on_a_shared_server(tmp_path, request):
    # A second pytest run, two xdist workers, both at FAKEGATE_URL: the same orderId in each.
    suite = tmp_path / "test_shared.py"
    suite.write_text(textwrap.dedent('''
        import json, urllib.request
        def _confirm(g):
            body = json.dumps({"paymentKey": "pk_shared", "orderId": "order-shared-1", "amount": 15000}).encode()
            h = {**g.headers, "Content-Type": "application/json", "Idempotency-Key": "k-shared"}
            return urllib.request.urlopen(urllib.request.Request(g.url + "/v1/payments/confirm", data=body, headers=h)).status
        def test_a(fakegate):
            assert _confirm(fakegate) == 200 and len(fakegate.payments()) == 1
        def test_b(fakegate):
            assert _confirm(fakegate) == 200 and len(fakegate.payments()) == 1
    '''))
    with fg.start() as server:
        env = {**os.environ, "FAKEGATE_URL": server.url}
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", str(suite)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        every = server._call("GET", "/__admin/payments", tenant=False)["payments"]
    tenants = sorted(p["tenant"] for p in every)
    assert len(every) == 2 and all(p["charges"] == 1 for p in every), every
    assert set(tenants) <= {"test_sk_fakegate_gw0", "test_sk_fakegate_gw1"}, tenants
    line(request, "2 xdist workers on one FAKEGATE_URL server: the same orderId charged once in each of %s"
         % ", ".join(tenants))
