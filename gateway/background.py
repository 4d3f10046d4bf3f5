"""The one way a service starts its long-lived background work (a writer loop, a poller, a sweep): a
``BackgroundTask`` runs one coroutine at a time as a named task, logs it when the work ends by an error (instead of
the error waiting unseen in a task nobody awaits), and at close stops it, bounded: the work may first finish by
itself (the service has asked it to), then it is cancelled and waited for; a task that will not unwind is logged and
left. Once closed it starts nothing more, so work a late caller asks for never outlives the service.

Work a request starts and nobody awaits (a cache write, an async guardrail) is not this: it goes to the bounded
task set (``gateway.task_set``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine

log = logging.getLogger("gateway")

#: how long a close waits for cancelled work to unwind before it logs the task and leaves it
CANCEL_WAIT_S = 5.0


class BackgroundTask:
    """One named piece of a service's background work: at most one task at a time, none after ``close``."""

    __slots__ = ("name", "_task", "_closed")

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self, work: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Run ``work()`` as a task named ``name``. False, and ``work`` never called, when the task runs already or
        was closed. A task that ended (by itself or by an error) may be started again until ``close``."""
        if self._closed or self.running:
            return False
        task = self._task = asyncio.get_running_loop().create_task(work(), name=self.name)
        task.add_done_callback(self._ended)
        return True

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so asyncio never reports it as lost
        if error is not None:
            log.error("background task %s stopped by an error", self.name, exc_info=error)

    async def join(self, timeout_s: float | None = None) -> bool:
        """Wait until the work ends by itself, at most ``timeout_s``, never cancelling it; whether it has ended."""
        task = self._task
        if task is None:
            return True
        if not task.done():
            await asyncio.wait((task,), timeout=timeout_s)
        return task.done()

    async def close(self, grace_s: float = 0.0, cancel_wait_s: float = CANCEL_WAIT_S) -> None:
        """Start nothing more; give the running work ``grace_s`` to end by itself, then cancel it and wait for it
        to unwind, at most ``cancel_wait_s`` (past that it is logged and left)."""
        self._closed = True
        task = self._task
        if task is None or task.done():
            return
        try:
            if grace_s > 0 and await self.join(grace_s):
                return
            task.cancel()
            if not await self.join(cancel_wait_s):
                log.warning("background task %s did not stop within %.1f s of its cancellation", self.name,
                            cancel_wait_s)
        except asyncio.CancelledError:  # the close itself was cancelled: the work must not outlive it
            task.cancel()
            raise
