"""The recorder with ``GATEWAY_LOG_STORE_URL``: the same background task as the embedded store's (entries, metrics,
spans, JSON lines), whose rows go to PostgreSQL through ``PgWriter`` instead of ``<data dir>/logs.db``.

Each record gets an idempotent key (``rid``: a random per-process token and a counter) when its row is built, so a
batch written twice (replayed from the spool after a lost acknowledgement) is stored once.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from gateway.observability.pglog.spool import Spool
from gateway.observability.pglog.store import PgLogStore, clean_text
from gateway.observability.pglog.writer import PgWriter
from gateway.observability.recorder import ObservabilityRecorder
from gateway.observability.rollups import RequestStats, bucket
from gateway.settings import Settings, data_path
from gateway.waiting import within

#: token counts beyond a bigint (an upstream's nonsense) are stored as this
_MAX_INT = 2**62
#: how long a worker's start waits for PostgreSQL (then it serves, and the writer connects and migrates later)
START_WAIT_S = 3.0


class PgRecorder(ObservabilityRecorder):
    def __init__(self, settings: Settings, **options: Any) -> None:
        super().__init__(settings, **options)
        assert settings.log_store_url
        #: the shared store the log routes read (they look for this attribute)
        self.pg = PgLogStore(settings.log_store_url, settings.log_retention_days)
        self.writer = PgWriter(self.pg, Spool(data_path(settings, "log-spool"), settings.log_spool_max_bytes),
                               self.metrics)
        self._token = uuid.uuid4().hex[:16]
        self._counter = itertools.count(1)

    async def _open_stores(self) -> None:
        """Apply the schema migrations (a store that is down at start does not stop the worker: records spool
        until it answers, and the writer applies them then), then start the writer."""
        try:
            await within(self.pg.open(), START_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - the writer retries; requests are served meanwhile
            self._warn("store", exc)
        await self.writer.start()

    def log_store_health(self) -> dict[str, Any]:
        return self.writer.health()

    async def _store(self, rows: list[tuple], lines: list[bytes], stats: list[RequestStats]) -> int:
        token, counter = self._token, self._counter
        records = []
        for (ts, workspace, trace_id, status, provider, _model, doc), s in zip(rows, stats):
            records.append((
                f"{token}-{next(counter):x}", ts, clean_text(workspace), clean_text(trace_id), status,
                clean_text(provider), clean_text(s.model), s.latency_ms,
                s.added_ms, min(s.tokens_in, _MAX_INT), min(s.tokens_out, _MAX_INT), s.cost, bucket(s.latency_ms),
                None if s.added_ms is None else bucket(s.added_ms), doc,
            ))
        await self.writer.submit(records)
        try:
            await asyncio.to_thread(self.sink.write, lines)
        except OSError as exc:
            self._warn("lines", exc)
        return 0

    async def close(self) -> None:
        await super().close()
        await self.writer.close()

