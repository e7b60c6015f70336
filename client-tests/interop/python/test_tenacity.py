"""tenacity around requests against fakegate (conftest.py runs the scenarios).

Default: @retry with no arguments around the usual function (post, raise_for_status):
tenacity retries every exception at once, for ever -- the 400 case is stopped after 4 s by the
test (stop_after_delay), as the key-inside variant is. Configured: only timeouts, connection
errors, 409, 429 and 5xx retried, 5 attempts, Retry-After waited plus up to 0.5 s, else
wait_random_exponential (full jitter), reraise=True.
"""
import itertools
import random
from importlib.metadata import version

import requests
from tenacity import retry, retry_if_exception, stop_after_attempt, stop_after_delay, wait_random_exponential

from conftest import CLIENT_TIMEOUT_S, retry_after_s

LIBRARY = "tenacity"
VERSION = version("tenacity")


def session():
    s = requests.Session()
    s.trust_env = False
    return s


def naive(req, s, key=None):
    r = s.post(req.url, data=req.body, headers={**req.headers, **({"Idempotency-Key": key()} if key else {})},
               timeout=CLIENT_TIMEOUT_S)
    r.raise_for_status()
    return r.status_code


def default_sender(stop=None):
    def send(req):
        s = session()
        kw = {"stop": stop} if stop else {}
        try:
            return retry(**kw)(naive)(req, s)
        except Exception as e:   # RetryError wraps the last attempt's
            inner = getattr(e, "last_attempt", None)
            exc = inner.exception() if inner else None
            return str(exc.response.status_code) if getattr(exc, "response", None) is not None else type(exc or e).__name__
    return send


class Retryable(Exception):
    def __init__(self, status=None, after_s=None, cause=None):
        super().__init__(status or cause)
        self.status, self.after_s = status, after_s


_jitter = wait_random_exponential(multiplier=0.5, max=4)


def wait_after_or_jitter(state):
    e = state.outcome.exception()
    if isinstance(e, Retryable) and e.after_s:
        return e.after_s + random.uniform(0, 0.5)
    return _jitter(state)


def configured_sender(req):
    s = session()

    @retry(retry=retry_if_exception(lambda e: isinstance(e, Retryable)), stop=stop_after_attempt(5),
           wait=wait_after_or_jitter, reraise=True)
    def attempt():
        try:
            r = s.post(req.url, data=req.body, headers=req.headers, timeout=CLIENT_TIMEOUT_S)
        except (requests.Timeout, requests.ConnectionError) as e:
            raise Retryable(cause=type(e).__name__)
        if r.status_code in (409, 429) or r.status_code >= 500:
            raise Retryable(r.status_code, retry_after_s(r.headers.get("Retry-After")))
        return r.status_code

    try:
        return attempt()
    except Retryable as e:
        return e.status or str(e)


def test_default_lost(interop):
    interop.run("default", "lost", default_sender(), {"arrivals": 2, "keys": 1, "charges": 1, "client": "200", "max_gap_ms": 1000})


def test_default_ra503(interop):
    interop.run("default", "ra503", default_sender(), {"arrivals": 2, "charges": 1, "client": "200", "findings": ["early_retry"]})


def test_default_timeout(interop):
    interop.run("default", "timeout", default_sender(), {"arrivals": 2, "keys": 1, "charges": 1, "client": "200"})


def test_default_r4xx(interop):
    interop.run("default", "r4xx", default_sender(stop_after_delay(4)), {"has_finding": "retried_4xx", "arrivals": (3, 100000)})


def test_default_burst(interop):
    interop.run("default", "burst", default_sender(), {"every_arrivals": 2, "charges": 6, "client": "200", "gaps_within": (0, 1000)})


def test_default_key_inside_lost(interop):
    n = itertools.count(1)

    def send(req):
        s = session()
        try:
            return retry(stop=stop_after_delay(3))(naive)(req, s, key=lambda: "%s-%d" % (req.key, next(n)))
        except Exception as e:
            return type(e).__name__
    interop.run("default, key made inside the retried function", "lost", send, {"has_finding": "new_key_resend"})


def test_configured_lost(interop):
    interop.run("configured", "lost", configured_sender)


def test_configured_ra503(interop):
    interop.run("configured", "ra503", configured_sender)


def test_configured_timeout(interop):
    interop.run("configured", "timeout", configured_sender)


def test_configured_r4xx(interop):
    interop.run("configured", "r4xx", configured_sender)


def test_configured_burst(interop):
    interop.run("configured", "burst", configured_sender)


def test_default_ra_frac(interop):
    interop.run("default", "ra_frac", default_sender(), {"arrivals": 2, "client": "200", "max_gap_ms": 1000})


def test_default_ra_neg(interop):
    interop.run("default", "ra_neg", default_sender(), {"arrivals": 2, "client": "200", "max_gap_ms": 1000})


def test_configured_ra_frac(interop):
    interop.run("configured", "ra_frac", configured_sender)


def test_configured_ra_neg(interop):
    interop.run("configured", "ra_neg", configured_sender)
