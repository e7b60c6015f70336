"""fakegate.plugin -- the pytest plugin (entry point pytest11 "fakegate").

Fixtures:
  fakegate_server  one server per scope (ini fakegate_scope: session, the default, or module),
                   started on a free port, or the running one at --fakegate-url / FAKEGATE_URL
                   (never stopped by the plugin then).
  fakegate         function scope: this xdist worker's tenant of that server
                   (test_sk_fakegate_<worker>), reset before the test.
A started server is stopped when its scope ends. Under xdist each worker is a process of its
own: with a URL all workers share one server, each in its own tenant (docs/tenants.md §9).
"""

import os

import pytest

from . import Fakegate, connect, find_binary, start

__all__ = ["worker_key"]


def pytest_addoption(parser):
    g = parser.getgroup("fakegate")
    g.addoption("--fakegate-bin", default=None,
                help="the fakegate binary to start (default: $FAKEGATE_BIN, else fakegate on PATH)")
    g.addoption("--fakegate-url", default=None,
                help="use this running server instead of starting one (default: $FAKEGATE_URL)")
    g.addoption("--fakegate-arg", action="append", default=[],
                help="a flag for a started server (repeatable), e.g. --fakegate-arg=--seed=7")
    parser.addini("fakegate_scope", "how long a started server lives: session (default) or module",
                  default="session")


def worker_key(config=None):
    """This worker's secret key: test_sk_fakegate_gw0, _gw1, ... under xdist, _main alone."""
    return "test_sk_fakegate_" + os.environ.get("PYTEST_XDIST_WORKER", "main")


def _scope(fixture_name, config):
    scope = config.getini("fakegate_scope") or "session"
    if scope not in ("session", "module", "package"):
        raise pytest.UsageError("fakegate_scope must be session or module, not %r" % scope)
    return scope


@pytest.fixture(scope=_scope)
def fakegate_server(request):
    """The server, as a handle of this worker's tenant. Started unless a URL is given."""
    config = request.config
    url = config.getoption("fakegate_url") or os.environ.get("FAKEGATE_URL")
    if url:
        yield connect(url, worker_key(config))
        return
    binary = find_binary(config.getoption("fakegate_bin"))
    if not binary:
        pytest.fail("fakegate: no binary (--fakegate-bin, FAKEGATE_BIN, or fakegate on PATH) and no "
                    "--fakegate-url / FAKEGATE_URL", pytrace=False)
    gate = start(binary, config.getoption("fakegate_arg"), secret_key=worker_key(config))
    try:
        yield gate
    finally:
        gate.stop()


@pytest.fixture
def fakegate(fakegate_server) -> Fakegate:
    """This worker's tenant, emptied before the test (its profile reset to the server's)."""
    gate = fakegate_server.tenant(fakegate_server.secret_key)
    gate.reset(_server_profile(fakegate_server))
    return gate


def _server_profile(gate):
    # A tenant's own profile outlives a reset (docs/tenants.md §9): put back the server's, so
    # one test's set_profile never leaks into the next.
    return gate._call("GET", "/__admin/profile", tenant=False)["profile"]
