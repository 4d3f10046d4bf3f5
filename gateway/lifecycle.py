"""One start/stop shape for a worker's background services: each is a ``Service`` (``async start()``, ``async
close()``), added to a ``Lifecycle`` in the order it must start; the lifecycle closes them in the reverse order, and a
start that fails closes what had started before the error goes on (aiohttp's ``CleanupContext`` keeps the same
promise). A part with another shape (a synchronous start, nothing to start) joins as a ``Stage``."""

from __future__ import annotations

import inspect
import logging
from typing import Awaitable, Callable, Protocol

log = logging.getLogger("gateway")


class Service(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


class Stage:
    """A part that is not a ``Service`` as one: ``start`` and ``close`` may be plain or async functions, or None
    when there is nothing to do then."""

    __slots__ = ("name", "_start", "_close")

    def __init__(self, name: str, start: Callable[[], Awaitable[None] | None] | None = None,
                 close: Callable[[], Awaitable[None] | None] | None = None) -> None:
        self.name = name
        self._start = start
        self._close = close

    async def start(self) -> None:
        await _run(self._start)

    async def close(self) -> None:
        await _run(self._close)

    def __repr__(self) -> str:
        return f"Stage({self.name})"


async def _run(step: Callable[[], Awaitable[None] | None] | None) -> None:
    if step is not None:
        done = step()
        if inspect.isawaitable(done):
            await done


class Lifecycle:
    """Services started in the order they were added and closed in the reverse order."""

    def __init__(self) -> None:
        self._planned: list[Service] = []
        self._started: list[Service] = []

    def add(self, service: Service) -> None:
        """Start ``service`` after those added before it (and close it before them). Only while none has started:
        a service added later would never be started."""
        if self._started:
            raise RuntimeError(f"{service!r} added to a lifecycle that has started")
        self._planned.append(service)

    async def start(self) -> None:
        """Start every service in order. When one fails, those already started are closed (in reverse) and the
        error is raised."""
        for service in self._planned:
            if service in self._started:
                continue
            try:
                await service.start()
            except BaseException:
                await self.close()
                raise
            self._started.append(service)

    async def close(self) -> None:
        """Close the started services, the last started first. A close that fails is logged and the others are
        still closed."""
        while self._started:
            service = self._started.pop()
            try:
                await service.close()
            except Exception as exc:  # one part failing to close must not keep the others open
                log.error("closing %r failed", service, exc_info=exc)
