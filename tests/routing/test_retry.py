"""Retry decisions and waits."""

import email.utils
import time

from gateway.http.errors import BadUpstreamResponse, GatewayError, UpstreamUnreachable
from gateway.routing.retry import BACKOFF_CAP_S, backoff_s, retry_after_s, should_retry


def error(status: int, headers=None) -> GatewayError:
    return GatewayError("x", status=status, headers=headers)


def test_default_codes_and_connection_failures_are_retried():
    assert all(should_retry(error(s), None) for s in (429, 500, 502, 503, 504))
    assert not should_retry(error(400), None) and not should_retry(error(401), None)
    assert should_retry(UpstreamUnreachable("down"), [418])
    assert not should_retry(BadUpstreamResponse("html"), [429])


def test_backoff_grows_and_is_capped():
    assert 0.05 <= backoff_s(0) <= 0.1
    assert 0.4 <= backoff_s(3) <= 0.8
    assert backoff_s(20) <= BACKOFF_CAP_S


def test_retry_after_forms():
    assert retry_after_s(error(429, [(b"retry-after-ms", b"250")])) == 0.25
    assert retry_after_s(error(429, [(b"retry-after", b"3")])) == 3.0
    future = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 <= retry_after_s(error(429, [(b"retry-after", future.encode())])) <= 10.5
    assert retry_after_s(error(429, [(b"retry-after", b"soon")])) is None
    assert retry_after_s(error(429)) is None
