"""Noticing that this worker is asked to stop, so responses that never end by themselves (event streams) can end
and let the server's graceful shutdown finish instead of waiting out its grace period and killing the worker.

The server (Granian) stops a worker with SIGTERM (SIGINT from a terminal) and handles it on the event loop; this
chains a handler in front of the server's own, which it then calls unchanged. Nothing is installed when the
current handler is not a Python callable (the default action stays the default action) or off the main thread.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopNotice:
    """``event`` is set once the worker receives a stop signal (handlers chained on first ``event`` access)."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    @property
    def event(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
            self._install(asyncio.get_running_loop(), self._event)
        return self._event

    @staticmethod
    def _install(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def chained(signum: int, frame: Any, previous: Any = previous) -> None:
                loop.call_soon_threadsafe(event.set)
                previous(signum, frame)

            signal.signal(sig, chained)
