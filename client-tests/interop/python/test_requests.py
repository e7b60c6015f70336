"""requests with HTTPAdapter(max_retries=...) against fakegate (conftest.py runs the scenarios).

Default: a Session with HTTPAdapter(max_retries=3) and timeout=2 s: requests turns the int into
Retry(3) (urllib3's rules: POST read errors and statuses not retried; only connection errors
are). Configured: HTTPAdapter(max_retries=JitterRetry(...)), the urllib3 case's Retry.
"""
import requests
from requests.adapters import HTTPAdapter

from conftest import CLIENT_TIMEOUT_S
from test_urllib3 import configured_retry

LIBRARY = "requests HTTPAdapter"
VERSION = requests.__version__


def session(max_retries):
    s = requests.Session()
    s.trust_env = False   # no proxy from the environment: fakegate is on this machine
    s.mount("http://", HTTPAdapter(max_retries=max_retries))
    return s


def sender(s):
    return lambda req: s.post(req.url, data=req.body, headers=req.headers, timeout=CLIENT_TIMEOUT_S).status_code


DEFAULT = {
    "lost": {"arrivals": 1, "charges": 1, "client": "ConnectionError"},
    "ra503": {"arrivals": 1, "charges": 0, "client": "503"},
    "timeout": {"arrivals": 1, "charges": 1, "client": "ReadTimeout"},
    "r4xx": {"arrivals": 1, "client": "400"},
    "burst": {"every_arrivals": 1, "charges": 0, "client": "500"},
}


def test_default_lost(interop):
    interop.run("default", "lost", sender(session(3)), DEFAULT["lost"])


def test_default_ra503(interop):
    interop.run("default", "ra503", sender(session(3)), DEFAULT["ra503"])


def test_default_timeout(interop):
    interop.run("default", "timeout", sender(session(3)), DEFAULT["timeout"])


def test_default_r4xx(interop):
    interop.run("default", "r4xx", sender(session(3)), DEFAULT["r4xx"])


def test_default_burst(interop):
    interop.run("default", "burst", sender(session(3)), DEFAULT["burst"])


def test_configured_lost(interop):
    interop.run("configured", "lost", sender(session(configured_retry())))


def test_configured_ra503(interop):
    interop.run("configured", "ra503", sender(session(configured_retry())))


def test_configured_timeout(interop):
    interop.run("configured", "timeout", sender(session(configured_retry())))


def test_configured_r4xx(interop):
    interop.run("configured", "r4xx", sender(session(configured_retry())))


def test_configured_burst(interop):
    interop.run("configured", "burst", sender(session(configured_retry())))


def test_default_ra_frac(interop):
    interop.run("default", "ra_frac", sender(session(3)), DEFAULT["ra503"])


def test_default_ra_neg(interop):
    interop.run("default", "ra_neg", sender(session(3)), DEFAULT["ra503"])


def test_configured_ra_frac(interop):
    interop.run("configured", "ra_frac", sender(session(configured_retry())))


def test_configured_ra_neg(interop):
    interop.run("configured", "ra_neg", sender(session(configured_retry())))
