"""Retry policy: which failures are retried, and how long to wait before the next try.

``attempts`` more tries after the first, on ``on_status_codes`` (default 429, 500, 502, 503, 504) and on connection
failures. The wait is exponential backoff with jitter (100 ms doubling, capped at 5 s, each wait drawn from its
upper half). With ``use_retry_after_headers`` the provider's ``retry-after-ms`` or ``retry-after`` (seconds or an
HTTP date) is waited instead; a wait longer than GATEWAY_RETRY_AFTER_MAX_MS (default 60 s) is not waited and the
target is given up (so a fallback can take over at once).
"""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

from gateway.http.errors import GatewayError, UpstreamUnreachable

DEFAULT_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 5.0


def should_retry(error: GatewayError, on_status_codes: list[int] | None) -> bool:
    if isinstance(error, UpstreamUnreachable):
        return True
    codes = on_status_codes if on_status_codes else DEFAULT_RETRY_STATUSES
    return error.status in codes


def backoff_s(retry_index: int) -> float:
    """Wait before retry number ``retry_index`` (0 for the first retry)."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * (2**retry_index))
    return ceiling * (0.5 + random.random() / 2)


def retry_after_s(error: GatewayError) -> float | None:
    """The wait the upstream asked for, from the relayed Retry-After headers, in seconds."""
    if not error.headers:
        return None
    values = {name.decode().lower(): value.decode("latin-1").strip() for name, value in error.headers}
    ms = values.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    after = values.get("retry-after")
    if after:
        try:
            return max(0.0, float(after))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(after).timestamp() - time.time())
            except (TypeError, ValueError, IndexError):
                return None
    return None
