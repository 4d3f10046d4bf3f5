"""The PostgreSQL log store's writer: a per-worker task between the recorder and the store that never makes the
recorder (let alone a request) wait for PostgreSQL.

The recorder hands over each built batch (``submit``). While the store answers, batches wait in memory (at most
``memory_records``) and the task writes them, up to ``batch_records`` at a time. When a write fails or times out,
or memory is full because the store is slow, the waiting records go to the worker's spool file (``spool.Spool``);
from then on new records are appended behind them, and the task replays the spool, oldest first, as soon as the
store answers again (retrying every ``RETRY_S``..``MAX_RETRY_S``). Records are counted in
``gateway_log_records_spooled_total`` when spooled and in ``gateway_log_records_dropped_total{reason="spool_full"}``
when the spool's bound (``GATEWAY_LOG_SPOOL_MAX_BYTES``) refuses them.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from typing import Any

from gateway.background import BackgroundTask
from gateway.observability.metrics import LOGS_DROPPED, LOGS_SPOOLED, Metrics
from gateway.observability.pglog.spool import Spool
from gateway.observability.pglog.store import PgLogStore
from gateway.waiting import wait_event

MEMORY_RECORDS = 10_000
BATCH_RECORDS = 2_000
RETRY_S = 0.25
MAX_RETRY_S = 5.0
IDLE_S = 1.0


class PgWriter:
    def __init__(self, store: PgLogStore, spool: Spool, metrics: Metrics, memory_records: int = MEMORY_RECORDS,
                 batch_records: int = BATCH_RECORDS) -> None:
        self.store = store
        self.metrics = metrics
        self.spool = spool
        self.memory_records = memory_records
        self.batch_records = batch_records
        self.pending: deque[Any] = deque()
        self.healthy = True
        self.written = 0
        self.spooled = 0
        self.dropped = 0
        self._wake = asyncio.Event()
        self._writer = BackgroundTask("log-store-writer")
        self._closing = False
        self._stop = asyncio.Event()
        self._file_lock = asyncio.Lock()  # one thread at a time on the spool file

    async def start(self) -> None:
        await asyncio.to_thread(self.spool.open)
        self._writer = BackgroundTask("log-store-writer")  # a writer started again writes again
        self._writer.start(self._run)

    async def submit(self, records: list[Any]) -> None:
        """Take a batch (recorder's background task): in memory while the store keeps up, else into the spool."""
        if not records:
            return
        if self.spool.records or len(self.pending) + len(records) > self.memory_records:
            waiting = list(self.pending)
            self.pending.clear()
            await self._to_spool(waiting + records)
        else:
            self.pending.extend(records)
        self._wake.set()  # written at once (a record is listed within about a second); more wait while one is

    async def _to_spool(self, records: list[Any]) -> None:
        async with self._file_lock:
            stored = await asyncio.to_thread(self.spool.append, records)
        if stored:
            self.spooled += len(records)
            self.metrics.count(LOGS_SPOOLED, (), len(records))
        else:
            self.dropped += len(records)
            self.metrics.count(LOGS_DROPPED, ("spool_full",), len(records))

    async def _run(self) -> None:
        delay = RETRY_S
        while True:
            if not self.spool.records and not self.pending:
                if self._closing:
                    return
                await wait_event(self._wake, IDLE_S)
                self._wake.clear()
                if not self.spool.records and not self.pending:
                    continue
            try:
                await self._write_some()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - unreachable, slow or failing: spool and retry
                self._failed(exc)
                if self.pending:
                    waiting = list(self.pending)
                    self.pending.clear()
                    await self._to_spool(waiting)
                if self._closing:
                    return
                await wait_event(self._stop, delay)
                delay = min(MAX_RETRY_S, delay * 2)
            else:
                if not self.healthy:
                    print("gateway: the log store answers again: spooled request records are being stored",
                          file=sys.stderr, flush=True)
                self.healthy = True
                delay = RETRY_S

    async def _write_some(self) -> None:
        if self.spool.records:
            async with self._file_lock:
                records, offset = await asyncio.to_thread(self.spool.read, self.batch_records)
            await self.store.write(records)
            async with self._file_lock:
                await asyncio.to_thread(self.spool.commit, offset, len(records))
            self.written += len(records)
            return
        chunk = [self.pending.popleft() for _ in range(min(self.batch_records, len(self.pending)))]
        try:
            await self.store.write(chunk)
        except BaseException:
            self.pending.extendleft(reversed(chunk))  # back at the head: spooled first, in order
            raise
        self.written += len(chunk)

    def _failed(self, exc: BaseException) -> None:
        if self.healthy:
            print(f"gateway: the log store failed ({exc.__class__.__name__}: {exc}); request records are spooled "
                  "until it answers", file=sys.stderr, flush=True)
        self.healthy = False  # the reason goes to the server log only: /health is public

    def health(self) -> dict[str, Any]:
        return {"backend": "postgresql", "healthy": self.healthy,
                "pending": len(self.pending), "spooled_records": self.spool.records, "spooled_bytes": self.spool.bytes,
                "spool_max_bytes": self.spool.max_bytes, "dropped": self.dropped}

    async def close(self, timeout_s: float = 5.0) -> None:
        """Store what waits (bounded by ``timeout_s``); what is left goes to the spool for the next start."""
        self._closing = True
        self._wake.set()
        self._stop.set()
        await self._writer.close(grace_s=timeout_s)
        if self.pending:
            waiting = list(self.pending)
            self.pending.clear()
            await self._to_spool(waiting)
        await asyncio.to_thread(self.spool.close)
        await self.store.close()
