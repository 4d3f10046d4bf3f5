"""Event-loop lag: a timer that should fire every interval measures how late it fires, per worker.

The lateness goes to ``gateway_event_loop_lag_seconds`` (label ``worker``: the process id). A loop that keeps
up fires within a millisecond or two; growing lag means the worker has more to do than its loop can run (CPU-bound
work, a blocking call, too many connections), well before requests start to time out. One timer callback every
``interval_s`` (0.5 s by default) is all it costs.
"""

from __future__ import annotations

import asyncio
import os
from typing import Callable

INTERVAL_S = 0.5


class LoopLagMonitor:
    def __init__(self, interval_s: float = INTERVAL_S,
                 observe: Callable[[float, str], None] | None = None) -> None:
        self.interval_s = interval_s
        if observe is None:
            from gateway.observability.metrics import Metrics

            observe = Metrics().observe_loop_lag
        #: where each measurement goes (the runtime's ``Metrics.observe_loop_lag``)
        self.observe = observe
        self.worker = str(os.getpid())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        """Start on the running loop (from the worker's startup)."""
        self._loop = asyncio.get_running_loop()
        self.worker = str(os.getpid())
        self._schedule()

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + self.interval_s
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        self.observe(max(0.0, self._loop.time() - self._due), self.worker)
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
