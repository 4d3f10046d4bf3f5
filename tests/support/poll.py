"""Poll until something appears (a log line, a record, a state): one bounded loop for sync and async tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

from tests.support.http import request
from tests.support.servers import ADMIN_KEY


def wait_for(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, *, fail: bool = True) -> Any:
    """Call ``check`` until it answers something truthy, and return that. When ``timeout`` passes first: an
    AssertionError, or (``fail=False``) the last falsy answer."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            break
        time.sleep(interval)
    assert value or not fail, f"condition not met within {timeout}s"
    return value


async def await_for(check: Callable[[], Any],
                    timeout: float = 10.0,  # noqa: ASYNC109 - polls a plain or async check, not one awaitable
                    interval: float = 0.02, *, fail: bool = True) -> Any:
    """``wait_for`` inside a running event loop; ``check`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value or time.monotonic() > deadline:
            break
        await asyncio.sleep(interval)
    assert value or not fail, f"condition not met within {timeout}s"
    return value


def wait_logs(server: Any, trace_id: str, count: int = 1, timeout: float = 5.0,
              want: Callable[[list[dict]], bool] = bool, key: str = ADMIN_KEY) -> list[dict]:
    """The trace's items in ``GET /v1/logs`` (newest first) once ``count`` are listed and ``want`` accepts them; the
    conventions promise a request is listed within 5 seconds."""

    def listed() -> list[dict] | None:
        resp = request("GET", f"{server.url}/v1/logs?trace_id={trace_id}&limit=100",
                       headers={"x-gateway-api-key": key})
        assert resp.status == 200, resp.text
        data = resp.json()["data"]
        return data if len(data) >= count and want(data) else None

    found = wait_for(listed, timeout, 0.1, fail=False)
    assert found, f"fewer than {count} log items for {trace_id} after {timeout}s"
    return found
