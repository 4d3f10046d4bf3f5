"""How long a request body may take to arrive (``GATEWAY_BODY_TIMEOUT_MS``): one watch per worker, a 408 past it.

A body that trickles in (or never starts after the headers) would otherwise hold its request, and a worker's
connection slot, for as long as the client likes. A body reader registers its task in the watch only while it
waits in ``receive()``, with the watch's tick when the body began to be read (``waiting[task] = start``): two dict
operations and an int read, no timer, no allocation, so a body that arrives with its headers costs nothing
measurable. A sweep runs a few times per timeout (at most once a second) and cancels each task that has waited past
it; the reader claims that cancellation (``claim``) and answers 408 instead (``timed_out``).

The worker puts its watch in the ASGI lifespan state (``WATCH_STATE``), which the server copies into every
request's ``scope["state"]``; a scope without one (the app driven in-process by a test) is not watched.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from gateway.background import BackgroundTask
from gateway.http.errors import RequestTimeout
from gateway.http.types import Message, Receive, Scope

#: the lifespan-state key of the worker's BodyWatch
WATCH_STATE = "gateway.body_watch"
#: sweeps per timeout (fewer for long timeouts: at most one a second)
SWEEPS_PER_TIMEOUT = 8


class BodyWatch:
    """The worker's body timeout (``seconds``): the body reads waiting in ``receive()``, swept as the module says."""

    __slots__ = ("seconds", "tick", "waiting", "_limit", "_interval", "_expired", "_sweeper")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._interval = min(1.0, seconds / SWEEPS_PER_TIMEOUT)
        #: ticks a body may take; a read expires once more than this many have passed since it began
        self._limit = math.ceil(seconds / self._interval)
        #: sweeps so far: a reader notes the tick its body began at
        self.tick = 0
        #: task -> the tick its body began, while the task waits in receive()
        self.waiting: dict[asyncio.Task[Any], int] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._sweeper = BackgroundTask("gateway-body-watch")

    async def start(self) -> None:
        self._sweeper.start(self._sweep)

    async def close(self) -> None:
        await self._sweeper.close()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self.sweep()

    def sweep(self) -> None:
        """One tick: cancel the reads that have waited past the timeout."""
        self.tick = tick = self.tick + 1
        limit = self._limit
        for task, began in list(self.waiting.items()):
            if tick - began > limit and task not in self._expired:
                self._expired.add(task)
                task.cancel()

    def claim(self, task: asyncio.Task[Any]) -> bool:
        """Whether this watch cancelled ``task`` (then the cancellation is taken back: the reader answers 408)."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def timed_out(self) -> RequestTimeout:
        return RequestTimeout(f"the request body did not arrive within {self.seconds:g} seconds "
                              "(GATEWAY_BODY_TIMEOUT_MS)", param="body", code="body_timeout")


def watch_of(scope: Scope) -> BodyWatch | None:
    """The worker's watch, as the lifespan state hands it to the request; None when the app runs without one."""
    state = scope.get("state")
    return state.get(WATCH_STATE) if state else None


async def watched_receive(watch: BodyWatch | None, receive: Receive, began: int) -> Message:
    """The next ASGI message of a body whose reading began at tick ``began``; the body timeout's 408 when the watch
    finds it waited past the timeout. (The first receive of a JSON body does this inline: body.py.)"""
    if watch is None:
        return await receive()
    task = asyncio.current_task()
    assert task is not None
    watch.waiting[task] = began
    try:
        return await receive()
    except asyncio.CancelledError:
        if watch.claim(task):
            raise watch.timed_out() from None
        raise
    finally:
        watch.waiting.pop(task, None)
