"""The PostgreSQL request-log backend (``GATEWAY_LOG_STORE_URL``): a batch's rows go to the store through the
worker's ``PgWriter`` (spooled while the store is away), its JSON lines to the ``LineSink``; reads go to the shared
``PgLogStore`` and the live tail listens with ``PgLogTail``.

Each record gets an idempotent key (``rid``: a random per-process token and a counter) when its row is handed over,
so a batch written twice (replayed from the spool after a lost acknowledgement) is stored once.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from gateway.observability.linesink import LineSink
from gateway.observability.logbackend import LogBackend, WarnOnce
from gateway.observability.logstore import LogFilter
from gateway.observability.logtail import LogTail
from gateway.observability.metrics import Metrics
from gateway.observability.pglog.spool import Spool
from gateway.observability.pglog.store import PgLogStore, clean_text
from gateway.observability.pglog.tail import PgLogTail
from gateway.observability.pglog.writer import PgWriter
from gateway.observability.rollups import RequestStats, WindowRows, bucket
from gateway.settings import Settings, data_path
from gateway.waiting import within

#: token counts beyond a bigint (an upstream's nonsense) are stored as this
_MAX_INT = 2**62
#: how long a worker's start waits for PostgreSQL (then it serves, and the writer connects and migrates later)
START_WAIT_S = 3.0


class PgLogs(LogBackend):
    """Request logs in PostgreSQL, shared by every instance."""

    def __init__(self, store: PgLogStore, writer: PgWriter, sink: LineSink, warn: WarnOnce | None = None) -> None:
        self.store = store
        self.writer = writer
        self.sink = sink
        self.warn = warn if warn is not None else WarnOnce()
        self._token = uuid.uuid4().hex[:16]
        self._counter = itertools.count(1)

    @classmethod
    def for_settings(cls, settings: Settings, metrics: Metrics, warn: WarnOnce | None = None) -> PgLogs:
        assert settings.log_store_url
        store = PgLogStore(settings.log_store_url, settings.log_retention_days)
        writer = PgWriter(store, Spool(data_path(settings, "log-spool"), settings.log_spool_max_bytes), metrics)
        return cls(store, writer, LineSink(settings.log_file), warn)

    # -- writing -------------------------------------------------------------------------------------------------
    async def open(self) -> None:
        """Apply the schema migrations (a store that is down at start does not stop the worker: records spool
        until it answers, and the writer applies them then), then start the writer."""
        try:
            await within(self.store.open(), START_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - the writer retries; requests are served meanwhile
            self.warn("store", exc)
        await self.writer.start()

    async def write(self, rows: list[tuple], lines: list[bytes], stats: list[RequestStats]) -> int:
        token, counter = self._token, self._counter
        records = []
        for (ts, workspace, trace_id, status, provider, _model, doc), s in zip(rows, stats, strict=True):
            records.append((
                f"{token}-{next(counter):x}", ts, clean_text(workspace), clean_text(trace_id), status,
                clean_text(provider), clean_text(s.model), s.latency_ms,
                s.added_ms, min(s.tokens_in, _MAX_INT), min(s.tokens_out, _MAX_INT), s.cost, bucket(s.latency_ms),
                None if s.added_ms is None else bucket(s.added_ms), doc,
            ))
        await self.writer.submit(records)  # kept in memory or spooled: none is lost here
        try:
            await asyncio.to_thread(self.sink.write, lines)
        except OSError as exc:
            self.warn("lines", exc)
        return 0

    def health(self) -> dict[str, Any]:
        return self.writer.health()

    async def close(self) -> None:
        await asyncio.to_thread(self.sink.close)
        await self.writer.close()

    # -- reading -------------------------------------------------------------------------------------------------
    async def query(self, workspace: str | None, flt: LogFilter, every_workspace: bool = False
                    ) -> tuple[list[tuple[int, bytes]], bool]:
        return await self.store.query(workspace, flt, every_workspace)

    async def window(self, res: int, since: int, workspace: str | None, provider: str | None = None,
                     model: str | None = None) -> WindowRows:
        return await self.store.read_window(res, since, workspace, provider, model)

    def tail(self) -> LogTail:
        return PgLogTail(self.store)
