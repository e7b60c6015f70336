"""fakegate -- a client for fakegate's admin API (docs/admin.md §5), standard library only.

start() runs the binary on a free port and reads its ready line; connect() names a running
server. Every admin call of a handle carries X-Fakegate-Tenant: its secret key
(docs/tenants.md §9), so handles of different keys never see each other's ledger, journal,
report or profile; the clock is the one thing they share. The pytest plugin
(fakegate.plugin) builds its fixtures on these.
"""

import base64
import json
import os
import re
import selectors
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Fakegate", "FakegateError", "start", "connect", "find_binary", "DEFAULT_KEY"]

DEFAULT_KEY = "test_sk_fakegate"

# No proxy, whatever the environment says: fakegate is on this machine.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# The one stdout line of a started server (docs/cli.md §1, "Start-up").
_READY = re.compile(r"^fakegate listening on (http://\S+) profile=(\S+) seed=(\d+)")

# Journal filters (docs/admin.md, GET /__admin/requests) by their Python names.
_FILTERS = {"order_id": "orderId", "payment_key": "paymentKey", "idempotency_key": "idempotencyKey"}


class FakegateError(AssertionError):
    """An admin call that failed, or findings where none were expected."""


class Clock:
    """The gateway clock (docs/webhooks.md §6.7): server-wide, shared by every tenant."""

    def __init__(self, gate):
        self._gate = gate

    def now(self):
        """{"now": ..., "offset_s": ...}."""
        return self._gate._call("GET", "/__admin/clock")

    def advance(self, seconds):
        """Move business time forward by seconds (fractions allowed); what fell due fires."""
        return self._gate._call("POST", "/__admin/clock", {"advance_s": seconds})


class Fakegate:
    """One tenant of one server. url: the server's base URL; secret_key: the tenant's key,
    which the code under test must send (headers, auth). A handle made by start() owns its
    process: stop() ends it. Not thread-safe to stop while another thread calls it."""

    def __init__(self, url, secret_key=DEFAULT_KEY, admin_token=None, process=None, seed=None):
        self.url = url.rstrip("/")
        self.secret_key = secret_key
        self.admin_token = admin_token
        self.process = process
        self.seed = seed
        self.clock = Clock(self)

    # -- what the code under test sends ------------------------------------------------------
    @property
    def auth(self):
        """The Authorization value for this tenant's key: Basic base64(key + ":")."""
        return "Basic " + base64.b64encode((self.secret_key + ":").encode()).decode()

    @property
    def headers(self):
        """{"Authorization": auth}: merge into the client's headers."""
        return {"Authorization": self.auth}

    def tenant(self, secret_key):
        """Another tenant of the same server (a new handle; the process stays with this one)."""
        return Fakegate(self.url, secret_key, self.admin_token, None, self.seed)

    # -- the admin API -----------------------------------------------------------------------
    def set_profile(self, profile):
        """This tenant's profile: a shipped name ("lossy") or a whole profile dict."""
        body = {"name": profile} if isinstance(profile, str) else profile
        return self._call("PUT", "/__admin/profile", body)

    def reset(self, profile=None):
        """Empty this tenant (ledger, records, journal view, report); optionally switch its
        profile (a name or a dict). Creates the tenant if it has made no request yet."""
        body = None
        if profile is not None:
            body = {"profile": profile}
        return self._call("POST", "/__admin/reset", body)

    def report(self):
        """The retry-behaviour report of this tenant: {"findings": [...], ...}."""
        return self._call("GET", "/__admin/report")

    def assert_no_findings(self):
        """Raise FakegateError naming every finding (kind, count, examples) if there is one."""
        r = self.report()
        if r.get("findings"):
            lines = ["%s x%d (%s): %s" % (f["kind"], f["count"], f["rule"], ", ".join(f["examples"]))
                     for f in r["findings"]]
            raise FakegateError("fakegate found retry problems:\n  " + "\n  ".join(lines))
        return r

    def payments(self, order_id=None):
        """The ledger: [{"payment": {...}, "confirm_attempts", "idempotency_keys", "charges"}]."""
        q = "?" + urllib.parse.urlencode({"orderId": order_id}) if order_id is not None else ""
        return self._call("GET", "/__admin/payments" + q)["payments"]

    def payment(self, order_id):
        """The ledger entry of one orderId, or None."""
        p = self.payments(order_id)
        return p[0] if p else None

    def requests(self, **filters):
        """The journal, oldest first, filtered (order_id=, payment_key=, idempotency_key=,
        route=, status=, outcome=, since_id=, limit=; camelCase names work too)."""
        q = {_FILTERS.get(k, k): v for k, v in filters.items() if v is not None}
        path = "/__admin/requests" + ("?" + urllib.parse.urlencode(q) if q else "")
        return self._call("GET", path)["requests"]

    def health(self):
        return self._call("GET", "/healthz", tenant=False)

    def stop(self, timeout_s=5):
        """End the process this handle started (SIGTERM, then SIGKILL); returns its exit code."""
        p, self.process = self.process, None
        if p is None:
            return None
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p.stdout:
            p.stdout.close()
        return p.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _call(self, method, path, body=None, tenant=True):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if tenant:
            req.add_header("X-Fakegate-Tenant", self.secret_key)
        if self.admin_token:
            req.add_header("Authorization", "Bearer " + self.admin_token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with _opener.open(req, timeout=30) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raise FakegateError("%s %s: %d %s" % (method, path, e.code, e.read().decode(errors="replace"))) from None


def find_binary(explicit=None):
    """explicit, else $FAKEGATE_BIN, else fakegate on PATH; None if none is found."""
    return explicit or os.environ.get("FAKEGATE_BIN") or shutil.which("fakegate")


def start(binary=None, args=(), secret_key=DEFAULT_KEY, seed=None, timeout_s=10.0, stderr=None):
    """Start fakegate on 127.0.0.1, a free port, --quiet, and wait for its ready line (at most
    timeout_s). args: more flags; stderr: where its errors go (default: this process's stderr).
    Returns a handle that owns the process (stop() it, or use it as a context manager).
    Raises FakegateError when it does not start."""
    binary = find_binary(binary)
    if not binary:
        raise FakegateError("no fakegate binary: pass --fakegate-bin, set FAKEGATE_BIN or put fakegate on PATH")
    cmd = [binary, "--host", "127.0.0.1", "--port", "0", "--quiet"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    cmd += list(args)
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    line = b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(p.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(p.stdout.fileno(), 512)
            if not chunk:
                break
            line += chunk
    m = _READY.match(line.decode(errors="replace"))
    if not m:
        p.kill()
        p.wait()
        raise FakegateError("%s did not start within %.0f s (exit %s; its message, if any, is on stderr above)"
                            % (" ".join(cmd), timeout_s, p.returncode))
    return Fakegate(m.group(1), secret_key, process=p, seed=int(m.group(3)))


def connect(url=None, secret_key=DEFAULT_KEY, admin_token=None):
    """A handle on a running server: url, else $FAKEGATE_URL."""
    url = url or os.environ.get("FAKEGATE_URL")
    if not url:
        raise FakegateError("connect: no url and FAKEGATE_URL is not set")
    return Fakegate(url, secret_key, admin_token or os.environ.get("FAKEGATE_ADMIN_TOKEN"))
