"""The request-log store's two interfaces, as ``gateway.state.base`` is the state store's: ``LogWriter``, what the
recorder stores each built batch through, and ``LogReader``, what ``GET /v1/logs``, its live stream and its
aggregates read. Each backend implements both (``LogBackend``): the embedded SQLite file
(``gateway.observability.sqlitelog.SqliteLogs``) and PostgreSQL (``gateway.observability.pglog.backend.PgLogs``);
``tests/observability/test_logbackend.py`` runs one suite on each."""

from __future__ import annotations

import abc
import sys
from typing import Any

from gateway.observability.logstore import LogFilter
from gateway.observability.logtail import LogTail
from gateway.observability.rollups import RequestStats, WindowRows


class LogWriter(abc.ABC):
    """Where the recorder's background task stores what it built from a batch of records."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Make the store ready (create or migrate it) at the worker's start; a store that is down does not stop
        the start where the backend can keep records until it answers."""

    @abc.abstractmethod
    async def write(self, rows: list[tuple], lines: list[bytes], stats: list[RequestStats]) -> int:
        """Store a built batch: its rows ``(ts, workspace, trace_id, status, provider, model, doc)``, its JSON log
        lines and its rollup figures (``rows[i]`` and ``stats[i]`` are one request's). Returns how many rows were
        lost; never raises because the store fails."""

    @abc.abstractmethod
    def health(self) -> dict[str, Any]:
        """What ``/health`` says of the store (``backend``, ``healthy``, and what the backend keeps waiting)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Store or keep what waits, and release files and connections (bounded)."""


class LogReader(abc.ABC):
    """The reads behind the log routes; each may be called from the event loop (a backend that blocks uses a
    thread itself)."""

    @abc.abstractmethod
    async def query(self, workspace: str | None, flt: LogFilter, every_workspace: bool = False
                    ) -> tuple[list[tuple[int, bytes]], bool]:
        """The newest rows matching ``flt`` first, as ``(id, doc)``, after its cursor; and whether more follow.
        ``every_workspace`` reads every workspace's rows (``workspace`` is then ignored)."""

    @abc.abstractmethod
    async def window(self, res: int, since: int, workspace: str | None, provider: str | None = None,
                     model: str | None = None) -> WindowRows:
        """The rollup rows of the ``res``-second slots from ``since`` on, summed over every writer."""

    @abc.abstractmethod
    def tail(self) -> LogTail:
        """A new live tail of the store (the log stream keeps one per worker)."""


class LogBackend(LogWriter, LogReader, abc.ABC):
    """One request-log store, both written and read."""


class WarnOnce:
    """A failing part of the request log said once on stderr, not once a batch."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def __call__(self, what: str, exc: BaseException) -> None:
        if what not in self._said:
            self._said.add(what)
            print(f"gateway: request log {what} failed: {exc.__class__.__name__}: {exc} (reported once)",
                  file=sys.stderr, flush=True)
