"""Micro benchmarks of the observability recorder (run with --benchmark-enable; ``-s`` prints per-record medians).

- ``record()``: what the request path pays, an O(1) enqueue (the budget for the whole gateway is ~300 µs).
- the background work per record (masking, cost, JSON entry, metric sums, spans), which is off the request path
  but still CPU a worker spends.
- a metrics flush of a batch's sums to prometheus_client.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import pytest

from gateway.observability.linesink import LineSink
from gateway.observability.logstore import LogStore
from gateway.observability.record import RequestRecord
from gateway.observability.recorder import ObservabilityRecorder
from gateway.observability.sqlitelog import SqliteLogs
from gateway.observability.tracing import request_spans
from gateway.schema.common import Usage
from gateway.settings import load
from tests.support.twins import compiled_twin

PER_CALL = 100


def make_record(i: int = 0) -> RequestRecord:
    now = time.perf_counter()
    rec = RequestRecord(f"trace-{i}", "chat", now)
    rec.workspace = "default"
    rec.provider = "vendorA"
    rec.model = "gpt-4o-mini"
    rec.status = 200
    rec.upstream_started = now + 0.0001
    rec.upstream_s = 0.02
    rec.total_s = 0.0205
    rec.usage = Usage(prompt_tokens=12, completion_tokens=40, total_tokens=52)
    rec.target_path = "config.targets[0]"
    rec.request_headers = [(b"authorization", b"Bearer sk-live-abcdefghijklmnop"),
                           (b"content-type", b"application/json"), (b"user-agent", b"bench/1.0"), (b"x-team", b"blue")]
    rec.metadata = {"_user": "u1", "env": "bench"}
    return rec


class _NoStore(LogStore):
    def open(self) -> None:
        return None

    def insert(self, rows: list[tuple]) -> None:
        return None


def make_recorder(tmp_path, otlp: bool = False) -> ObservabilityRecorder:
    env = {"GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_LOG_FILE": "off"}
    if otlp:
        env["GATEWAY_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    return ObservabilityRecorder(load(env), SqliteLogs(_NoStore(":memory:"), LineSink("off")), queue_size=10**9)


def test_record_enqueue(benchmark, tmp_path):
    recorder = make_recorder(tmp_path)
    rec = make_record()
    record = recorder.record
    queue_holder = recorder

    def hundred() -> None:
        for _ in range(PER_CALL):
            record(rec)
        queue_holder._queue.clear()

    benchmark(hundred)
    per_record_us = benchmark.stats.stats.median / PER_CALL * 1e6 if benchmark.stats else 0.0
    benchmark.extra_info["record_us"] = per_record_us
    print(f"\nrecord(): {per_record_us:.3f} µs per call")


def test_background_build_per_record(benchmark, tmp_path):
    recorder = make_recorder(tmp_path)
    records = [make_record(i) for i in range(PER_CALL)]
    loop = asyncio.new_event_loop()

    def build() -> None:
        loop.run_until_complete(recorder._build(deque(records)))

    benchmark(build)
    loop.close()
    per_record_us = benchmark.stats.stats.median / PER_CALL * 1e6 if benchmark.stats else 0.0
    benchmark.extra_info["build_us"] = per_record_us
    print(f"\nbackground build (entry, JSON, masking, cost, metric sums): {per_record_us:.2f} µs per record")


def test_span_build_per_record(benchmark, tmp_path):
    """The spans of one record from the stats its log row was built with, encoded as the exporter queues them."""
    recorder = make_recorder(tmp_path, otlp=True)
    rec = make_record()
    _, _, stats = recorder.rows.build(rec, 0.0)
    exporter = recorder.exporter

    def spans() -> None:
        exporter.add(request_spans(rec, stats, lambda text: text))
        exporter._queue.clear()

    benchmark(spans)
    if benchmark.stats:
        print(f"\nspans for one record, built and encoded: {benchmark.stats.stats.median * 1e6:.2f} µs")


def test_metrics_flush_of_a_batch(benchmark, tmp_path):
    recorder = make_recorder(tmp_path)
    rows = recorder.rows
    rec = make_record()

    def fill_and_flush() -> None:
        for _ in range(PER_CALL):
            rows.build(rec, 0.0)
        recorder.flush_metrics()

    benchmark(fill_and_flush)
    if benchmark.stats:
        print(f"\nrow, line, stats, metric sums + flush: {benchmark.stats.stats.median / PER_CALL * 1e6:.2f} µs "
              "per record")


@pytest.mark.parametrize("twin", ["compiled", "pure"])
def test_record_rows_per_record(benchmark, twin):
    """One record to its row, line, stats and metric sums: the compiled kernel against its pure twin."""
    from gateway.observability import recordrow as pure_recordrow
    from gateway.observability.cost import Prices
    from gateway.observability.masking import Masker

    module = compiled_twin("recordrow") if twin == "compiled" else pure_recordrow
    rows = module.RecordRows(Masker(), Prices())
    records = [make_record(i) for i in range(PER_CALL)]
    for rec in records:
        rec.request_headers = None

    def hundred() -> None:
        for rec in records:
            rows.build(rec, 0.0)
        rows.take_sums()

    benchmark(hundred)
    if benchmark.stats:
        print(f"\nRecordRows.build ({twin}): {benchmark.stats.stats.median / PER_CALL * 1e6:.2f} µs per record")
