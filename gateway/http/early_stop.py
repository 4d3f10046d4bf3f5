"""A stop signal that reaches a worker before its server listens for one is kept and handed on, not lost.

Granian forks each worker from its main process, imports the app in the worker, and only then installs the worker's
own SIGTERM / SIGINT handlers on the event loop. In between, the worker runs the main process's inherited handler,
which only flags the (copied) main server object: a stop signal in that window is swallowed, and the worker serves
on until the main process kills it after the shutdown grace period (30 s by default), or is orphaned if the main
process is itself killed first. Importing the gateway takes long enough (hundreds of milliseconds, more on a busy
host) for a deploy or a test that stops a gateway just after it started to hit the window.

``arm`` (in the main process, before the server forks) registers a fork hook that gives every child a handler of
its own that only records the signal; ``hand_on`` (in the worker, once the server's handlers are installed: the
lifespan startup) sends a recorded signal to the worker again, so the server's handler stops it gracefully.
"""

from __future__ import annotations

import os
import signal
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Pending:
    """The stop signal a forked worker received before ``hand_on`` (module-level, as ``gateway.process_ids``'s id
    sources are: the ``os.register_at_fork`` hook that resets it is process-wide and cannot be removed)."""

    __slots__ = ("armed", "signum")

    def __init__(self) -> None:
        self.armed = False
        self.signum: int | None = None

    def record(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum

    def in_child(self) -> None:
        self.signum = None
        for sig in STOP_SIGNALS:
            signal.signal(sig, self.record)


_PENDING = _Pending()


def arm() -> None:
    """Every process forked from here on records a stop signal until its server's handlers replace this one."""
    if not _PENDING.armed:
        os.register_at_fork(after_in_child=_PENDING.in_child)
        _PENDING.armed = True


def hand_on() -> bool:
    """Send this process the stop signal it recorded before its server listened (True if there was one)."""
    signum = _PENDING.signum
    if signum is None:
        return False
    _PENDING.signum = None
    os.kill(os.getpid(), signum)
    return True
