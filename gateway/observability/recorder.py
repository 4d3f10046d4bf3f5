"""The recorder the pipeline hands finished records to: an O(1) enqueue, and one background task per worker that
turns records into log rows and lines (stored through a ``LogWriter``: SQLite or PostgreSQL), metric sums and trace
spans.

``record`` only appends to a bounded deque (a full queue drops the record and counts it). The task wakes every
``interval_s`` or when ``batch_size`` records wait, builds each record's row, line, stats and metric sums in one
pass (``RecordRows``: compiled, ``gateway._speedups.recordrow``, or its pure twin) in slices (yielding to the event
loop between slices), hands rows, lines and rollup figures to the log writer, flushes metric sums to
prometheus_client about once a second and queues spans for the OTLP exporter. ``close`` drains and flushes everything.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from functools import partial
from typing import Any

from gateway.background import BackgroundTask
from gateway.observability.cost import Prices
from gateway.observability.entry import IsoClock, masked_request_headers
from gateway.observability.logbackend import LogWriter, WarnOnce
from gateway.observability.masking import Masker
from gateway.observability.metrics import LOGS_DROPPED, Metrics, MetricsAggregator
from gateway.observability.record import Recorder, RequestRecord
from gateway.observability.recordrow_in_use import RecordRows
from gateway.observability.rollups import RequestStats
from gateway.observability.sqlitelog import SqliteLogs
from gateway.observability.tracing import OtlpExporter, request_spans
from gateway.settings import Settings
from gateway.waiting import wait_event

QUEUE_SIZE = 10_000
#: records that wake the task before its interval. A record holds its decoded request, headers and answer until its
#: batch is built: at 128 a worker holds fewer of them under load (RSS after 60,000 requests 57.4-57.9 MB, against
#: 59.9-60.6 MB at 512) at the same CPU per request (alternated runs); building each record as it ended instead,
#: with the code and tables cold every time, cost 10-14 us more per request than a batch
BATCH_SIZE = 128
INTERVAL_S = 0.5
METRICS_INTERVAL_S = 1.0
_SLICE = 32  # records built between two yields to the event loop


class ObservabilityRecorder(Recorder):
    """Request logs (through ``logs``: SQLite by default), Prometheus metrics and OTLP traces, all off the request
    path."""

    def __init__(self, settings: Settings, logs: LogWriter | None = None, exporter: Any = None,
                 queue_size: int = QUEUE_SIZE, batch_size: int = BATCH_SIZE, interval_s: float = INTERVAL_S,
                 prices: Prices | None = None, metrics: Metrics | None = None,
                 warn: WarnOnce | None = None) -> None:
        self.settings = settings
        #: the worker's rare-event counts (a private one when none is given), flushed with the record sums
        self.metrics = metrics if metrics is not None else Metrics()
        self._warn = warn if warn is not None else WarnOnce()
        #: where built batches are stored (the worker's log backend, which the log routes read)
        self.logs = logs if logs is not None else SqliteLogs.for_settings(settings, self._warn)
        if exporter is None and settings.otlp_endpoint:
            exporter = OtlpExporter(settings.otlp_endpoint, metrics=self.metrics)
        self.exporter = exporter
        self.masker = Masker(settings.organisation_headers_to_mask)
        self.prices = prices if prices is not None else Prices()
        self.aggregator = MetricsAggregator(self.metrics)
        #: each record's row, line, stats and metric sums (log timestamps: each second formatted once)
        self.rows = RecordRows(self.masker, self.prices, IsoClock())
        self._queue: deque[RequestRecord] = deque()
        self._max = queue_size
        self._batch = batch_size
        self._interval = interval_s
        self._dropped = 0
        self._wake: asyncio.Event | None = None
        self._writer = BackgroundTask("observability-recorder")
        self._closing = False
        self._last_metrics = time.monotonic()

    # -- the request path ------------------------------------------------------------------------------------
    def record(self, record: RequestRecord) -> None:
        queue = self._queue
        if len(queue) >= self._max:
            self._dropped += 1
            return
        queue.append(record)
        if len(queue) == self._batch and self._wake is not None:
            self._wake.set()

    # -- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.logs.open()
        if self.exporter is not None:
            await self.exporter.start()
        self._wake = asyncio.Event()
        self._writer = BackgroundTask("observability-recorder")  # a recorder started again writes again
        self._writer.start(self._run)

    async def close(self) -> None:
        """Drain the queue, write, flush metrics and spans; bounded so shutdown never hangs on a slow sink."""
        self._closing = True
        if self._wake is not None:
            self._wake.set()
        await self._writer.close(grace_s=10.0)  # its last pass writes what waits; cancelled past that
        if self._queue:
            await self.drain()
        self.flush_metrics()
        if self.exporter is not None:
            await self.exporter.close()
        await self.logs.close()

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            await wait_event(wake, self._interval)
            wake.clear()
            try:
                await self.drain()
            except Exception as exc:  # noqa: BLE001 - the task must outlive any one bad batch
                self._warn("drain", exc)
            if self._closing:
                return

    # -- the background work -----------------------------------------------------------------------------------
    async def drain(self) -> None:
        """Take every waiting record and write it out (also used by tests and at shutdown)."""
        records, self._queue = self._queue, deque()
        if self._dropped:
            self.metrics.count(LOGS_DROPPED, ("queue_full",), self._dropped)
            self._dropped = 0
        if records:
            rows, lines, stats = await self._build(records)
            if rows:
                failed = await self.logs.write(rows, lines, stats)
                if failed:
                    self.metrics.count(LOGS_DROPPED, ("write_failed",), failed)
        now = time.monotonic()
        if now - self._last_metrics >= METRICS_INTERVAL_S or self._closing:
            self._last_metrics = now
            self.flush_metrics()

    def flush_metrics(self) -> None:
        """Write the records' metric sums and the rare-event counts to prometheus_client."""
        self.aggregator.flush(*self.rows.take_sums())

    async def _build(self, records: deque[RequestRecord]) -> tuple[list[tuple], list[bytes], list[RequestStats]]:
        offset = time.time() - time.perf_counter()
        build = self.rows.build
        exporter = self.exporter
        rows: list[tuple] = []
        lines: list[bytes] = []
        stats: list[RequestStats] = []
        for i, rec in enumerate(records):
            if i and not i % _SLICE:
                await asyncio.sleep(0)
            try:
                row, doc, stat = build(rec, offset)
                rows.append(row)
                lines.append(doc)
                stats.append(stat)  # rows[i] and stats[i] are the same request's
                if exporter is not None:
                    exporter.add(request_spans(rec, stat, partial(self._scrub_error, rec)))
            except Exception as exc:  # noqa: BLE001 - one odd record must not lose the batch
                self.metrics.count(LOGS_DROPPED, ("build_failed",))
                self._warn("build", exc)
        return rows, lines, stats

    def _scrub_error(self, rec: RequestRecord, text: str) -> str:
        """A failed request's error text with the clear secrets of its request headers hidden (as its log line)."""
        _, secrets = masked_request_headers(rec, self.masker)
        return self.masker.scrub(text, secrets=secrets)
