"""The one bounded set of background tasks: work a request starts and nobody awaits (a cache write, an async
guardrail, a log line waiting for its guardrails) runs as a task held here, at most ``limit`` at once per worker;
beyond that the work is not started and the caller says so. At shutdown the set is waited for or cancelled, bounded.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine, Generic, TypeVar

T = TypeVar("T")


class BoundedTasks(Generic[T]):
    """Background tasks of one kind, at most ``limit`` running at once (a task leaves the set when it ends)."""

    __slots__ = ("limit", "_tasks")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tasks: set[asyncio.Task[T]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T] | None:
        """Run ``work()`` as a task of its own; None (and ``work`` never called) when ``limit`` tasks run already."""
        if len(self._tasks) >= self.limit:
            return None
        task = asyncio.get_running_loop().create_task(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait(self, timeout_s: float) -> None:
        """Wait until the running tasks end, at most ``timeout_s`` (they keep running past it)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def cancel(self) -> None:
        """Cancel the running tasks and wait for them to unwind."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
