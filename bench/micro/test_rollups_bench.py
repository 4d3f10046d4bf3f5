"""Micro benchmarks of the aggregates' write path (run with --benchmark-enable; ``-s`` prints per-record medians).

What a worker's background task spends per record to keep the rollups (``RollupStore.add``: summing the batch,
merging histograms, one SQLite transaction) for a busy gateway's batch: 512 records of the same 10-second slot over
12 (provider, model, status) groups. Off the request path, beside the ~15 µs of the log entry and row.
"""

from __future__ import annotations

import time

from gateway.observability.rollups import RequestStats, RollupStore, summarise

BATCH = 512
GROUPS = [(p, m, s) for p, m in (("vendorA", "gpt-4o"), ("vendorA", "gpt-4o-mini"), ("anthropic", "claude"),
                                 ("groq", "llama")) for s in (200, 429, 500)]


def batch(now: float) -> list[RequestStats]:
    out = []
    for i in range(BATCH):
        provider, model, status = GROUPS[i % len(GROUPS)] if i % 10 == 0 else GROUPS[(i % 4) * 3]
        out.append(RequestStats(now + i * 0.0002, "default", provider, model, status, 20.0 + (i % 50),
                                0.6 + (i % 7) / 10, 12, 40, 0.0001))
    return out


def test_rollup_write_per_record(benchmark, tmp_path):
    store = RollupStore(str(tmp_path / "logs.db"))
    now = int(time.time() // 10) * 10 + 0.5
    records = batch(now)
    store.add(records, now=now)  # tables exist, rows of this slot exist: each add merges like a busy worker's
    benchmark(store.add, records, now)
    store.close()
    if benchmark.stats:
        print(f"\nrollups (sum + merge + write) per record: {benchmark.stats.stats.median / BATCH * 1e6:.2f} µs")


def test_rollup_summing_per_record(benchmark):
    records = batch(time.time())
    benchmark(summarise, records)
    if benchmark.stats:
        print(f"\nrollups (summing only) per record: {benchmark.stats.stats.median / BATCH * 1e6:.2f} µs")
