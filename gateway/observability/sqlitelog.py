"""The embedded request-log backend: rows in ``<data dir>/logs.db`` (``LogStore``), their rollups in the same file
(``RollupStore``) and the JSON lines (``LineSink``), written together in one thread hop per batch; read through the
same file by every worker."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.observability.linesink import LineSink
from gateway.observability.logbackend import LogBackend, WarnOnce
from gateway.observability.logstore import LogFilter, LogStore
from gateway.observability.logtail import LogTail
from gateway.observability.rollups import RequestStats, RollupStore, WindowRows
from gateway.settings import Settings, data_path


class SqliteLogs(LogBackend):
    """Request logs in SQLite (WAL), shared by the workers of one machine."""

    def __init__(self, store: LogStore, sink: LineSink, warn: WarnOnce | None = None) -> None:
        self.store = store
        self.rollups = RollupStore(store.path)
        self.sink = sink
        self.warn = warn if warn is not None else WarnOnce()

    @classmethod
    def for_settings(cls, settings: Settings, warn: WarnOnce | None = None) -> SqliteLogs:
        """The worker's store: ``logs.db`` in the data directory, lines where ``GATEWAY_LOG_FILE`` says."""
        store = LogStore(str(data_path(settings, "logs.db")), settings.log_retention_rows)
        return cls(store, LineSink(settings.log_file), warn)

    # -- writing -------------------------------------------------------------------------------------------------
    async def open(self) -> None:
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        self.store.open()
        self.rollups.open()

    async def write(self, rows: list[tuple], lines: list[bytes], stats: list[RequestStats]) -> int:
        return await asyncio.to_thread(self._write, rows, lines, stats)

    def _write(self, rows: list[tuple], lines: list[bytes], stats: list[RequestStats]) -> int:
        """Insert the rows and their rollups and write the lines (in a thread); returns how many rows were lost."""
        failed = 0
        try:
            self.store.insert(rows)
        except Exception as exc:  # noqa: BLE001 - a locked or full disk loses this batch, not the worker
            failed = len(rows)
            self.warn("store", exc)
        if stats:
            try:
                self.rollups.add(stats)
            except Exception as exc:  # noqa: BLE001 - aggregates are a view: losing one batch is not fatal
                self.warn("aggregates", exc)
        try:
            self.sink.write(lines)
        except OSError as exc:
            self.warn("lines", exc)
        return failed

    def health(self) -> dict[str, Any]:
        return {"backend": "sqlite", "healthy": True}

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self.store.close()
        self.rollups.close()
        self.sink.close()

    # -- reading -------------------------------------------------------------------------------------------------
    async def query(self, workspace: str | None, flt: LogFilter, every_workspace: bool = False
                    ) -> tuple[list[tuple[int, bytes]], bool]:
        return await asyncio.to_thread(self.store.query, workspace, flt, every_workspace)

    async def window(self, res: int, since: int, workspace: str | None, provider: str | None = None,
                     model: str | None = None) -> WindowRows:
        return await asyncio.to_thread(self.rollups.read, res, since, workspace, provider, model)

    def tail(self) -> LogTail:
        return LogTail(self.store.path)
