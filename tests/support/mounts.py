"""Where a test URL leads when no socket serves it: the in-process gateways (``tests/support/inprocess.py``) mount
themselves here under a base URL of their own while they run, and the raw HTTP helpers (``tests/support/http.py``,
``tests/support/sse.py``) send a URL under such a base to that gateway's app instead of opening a connection. So
the test helpers that take a server (``api``, ``chat``, ``create_key``, ``wait_logs``...) work unchanged against an
in-process gateway."""

from __future__ import annotations

from typing import Any

#: how every mounted base URL begins (``http://in-process-<n>.test``)
PREFIX = "http://in-process-"
#: base URL -> the in-process gateway serving it (only while it runs)
MOUNTED: dict[str, Any] = {}


def mounted(url: str) -> Any | None:
    """The in-process gateway serving ``url``, or None for a URL of a real server."""
    if not url.startswith(PREFIX):  # a real server's URL costs one string check
        return None
    end = url.find("/", len(PREFIX))
    return MOUNTED.get(url if end < 0 else url[:end])
