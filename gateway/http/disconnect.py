"""Noticing a client that leaves a streamed answer while the upstream is silent.

A relay notices a gone client at its next send (Granian raises). Between sends (a model thinking, a slow
upstream) only a pending ``receive()`` answers ``http.disconnect``, so ``DisconnectWatch`` cancels the relaying
task when that message arrives, which closes the upstream request at once. The watcher task starts only once the
stream has lasted ``WATCH_AFTER_S``: a stream that ends sooner (most do, on a fast upstream) pays one timer instead
of a task and its ``receive()`` round trip, and a client leaving a longer one is noticed at most that much later.
"""

from __future__ import annotations

import asyncio

from gateway.http.types import Receive

#: how long a stream runs before its client is watched between sends
WATCH_AFTER_S = 0.05


async def _wait_disconnect(receive: Receive, task: asyncio.Task) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            task.cancel()
            return


class DisconnectWatch:
    """Cancels ``task`` (the relay) when the client disconnects, watching from ``WATCH_AFTER_S`` on."""

    __slots__ = ("_receive", "_task", "_timer", "_watcher")

    def __init__(self, receive: Receive, task: asyncio.Task, after_s: float = WATCH_AFTER_S) -> None:
        self._receive = receive
        self._task = task
        self._watcher: asyncio.Future | None = None
        self._timer = asyncio.get_running_loop().call_later(after_s, self._start)

    def _start(self) -> None:
        self._watcher = asyncio.ensure_future(_wait_disconnect(self._receive, self._task))

    def fired(self) -> bool:
        """Whether the watcher saw the client leave (and so cancelled the task)."""
        watcher = self._watcher
        return (watcher is not None and watcher.done() and not watcher.cancelled()
                and watcher.exception() is None)

    def stop(self) -> None:
        self._timer.cancel()
        if self._watcher is not None:
            self._watcher.cancel()
