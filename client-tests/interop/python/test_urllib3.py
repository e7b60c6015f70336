"""urllib3's Retry against fakegate (conftest.py runs the scenarios).

Default: PoolManager(timeout=2 s) and its default retries, Retry(3): POST is not in
allowed_methods, so neither a read error nor a status is retried. Configured: allowed_methods
None (every method), status_forcelist 409/429/5xx, Retry-After respected with up to 0.5 s of
jitter on top (and parsed leniently: 1.26 raises InvalidHeader on "2.5" or "-1"), and full
jitter instead of urllib3 1.26's backoff, whose first retry waits 0 s (and which has no
backoff_jitter before 2.0).
"""
import random
import time

import urllib3
from urllib3.exceptions import InvalidHeader
from urllib3.util.retry import Retry

from conftest import CLIENT_TIMEOUT_S, full_jitter

LIBRARY = "urllib3 Retry"
VERSION = urllib3.__version__


class JitterRetry(Retry):
    def parse_retry_after(self, retry_after):
        # urllib3 1.26 raises InvalidHeader for anything but digits or an HTTP-date ("2.5",
        # "-1"), and the request fails with it: take a number as seconds, else no value.
        try:
            return super().parse_retry_after(retry_after)
        except InvalidHeader:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return None

    def get_backoff_time(self):
        return full_jitter(len(self.history))

    def sleep_for_retry(self, response=None):
        after = self.get_retry_after(response) if response is not None else None
        if after:
            time.sleep(after + random.uniform(0, 0.5))
            return True
        return False


def configured_retry(cls=JitterRetry, **kw):
    return cls(total=4, allowed_methods=None, status_forcelist=[409, 429, 500, 502, 503, 504],
               backoff_factor=0.2, respect_retry_after_header=True, raise_on_status=False, **kw)


def pool(retries=None):
    kw = {} if retries is None else {"retries": retries}
    return urllib3.PoolManager(timeout=urllib3.Timeout(total=CLIENT_TIMEOUT_S), **kw)


def sender(http):
    return lambda req: http.request("POST", req.url, body=req.body, headers=req.headers).status


DEFAULT = {
    "lost": {"arrivals": 1, "charges": 1, "client": "ProtocolError"},
    "ra503": {"arrivals": 1, "charges": 0, "client": "503"},
    "timeout": {"arrivals": 1, "charges": 1, "client": "ReadTimeoutError"},
    "r4xx": {"arrivals": 1, "client": "400"},
    "burst": {"every_arrivals": 1, "charges": 0, "client": "500"},
}


def test_default_lost(interop):
    interop.run("default", "lost", sender(pool()), DEFAULT["lost"])


def test_default_ra503(interop):
    interop.run("default", "ra503", sender(pool()), DEFAULT["ra503"])


def test_default_timeout(interop):
    interop.run("default", "timeout", sender(pool()), DEFAULT["timeout"])


def test_default_r4xx(interop):
    interop.run("default", "r4xx", sender(pool()), DEFAULT["r4xx"])


def test_default_burst(interop):
    interop.run("default", "burst", sender(pool()), DEFAULT["burst"])


def test_configured_lost(interop):
    interop.run("configured", "lost", sender(pool(configured_retry())))


def test_configured_ra503(interop):
    interop.run("configured", "ra503", sender(pool(configured_retry())))


def test_configured_timeout(interop):
    interop.run("configured", "timeout", sender(pool(configured_retry())))


def test_configured_r4xx(interop):
    interop.run("configured", "r4xx", sender(pool(configured_retry())))


def test_configured_burst(interop):
    interop.run("configured", "burst", sender(pool(configured_retry())))


def test_configured_without_jitter_burst(interop):
    # backoff_factor alone: urllib3 1.26 waits 0 s before the first retry, so every payment
    # is resent at once after its failure.
    interop.run("configured, plain Retry (no jitter)", "burst", sender(pool(configured_retry(Retry))),
                {"every_arrivals": 2, "charges": 6, "client": "200", "gaps_within": (0, 500), "findings": None})


def test_default_ra_frac(interop):
    interop.run("default", "ra_frac", sender(pool()), DEFAULT["ra503"])


def test_default_ra_neg(interop):
    interop.run("default", "ra_neg", sender(pool()), DEFAULT["ra503"])


def test_configured_ra_frac(interop):
    interop.run("configured", "ra_frac", sender(pool(configured_retry())))


def test_configured_ra_neg(interop):
    interop.run("configured", "ra_neg", sender(pool(configured_retry())))


def test_configured_without_lenient_parse_ra_frac(interop):
    # Retry itself, status_forcelist and respect_retry_after_header: "2.5" is InvalidHeader.
    interop.run("configured, plain Retry", "ra_frac", sender(pool(configured_retry(Retry))),
                {"arrivals": 1, "client": "InvalidHeader", "findings": None})
