"""Micro benchmark of the SQLite request-log store's inserts (run with --benchmark-enable; ``-s`` prints per-row
medians): batches of 128 rows, as the recorder writes them, into a store already holding 100,000 rows (the default
retention), with the gateway's own trace ids (a per-worker prefix and a counter) and with random ones, as clients
that send a W3C ``traceparent`` bring. Indexed by run of rows first, both cost the same (a 2-core AMD EPYC VM: 4.5
and 4.9 us a row); indexed by trace id alone, as before, random ids cost 14.0 us a row (gateway ids 4.4). A batch as
multi-row ``INSERT OR ROLLBACK`` statements instead of a statement per row (``executemany``), a 2-core Intel Xeon VM,
two alternated runs each: gateway ids 6.0-8.7 -> 5.1-5.7 us a row, random ids 9.1-10.1 -> 6.6-7.0 (multi-row
statements with the default conflict clause: 6.7-7.3 and 8.5-8.7, each writing a statement journal file).
"""

from __future__ import annotations

import itertools
import secrets

import pytest

from gateway.observability.logstore import LogStore

BATCH = 128
DOC = b'{"trace_id":"t","provider":"vendorA","model":"gpt-4o-mini","status":200,"pad":"' + b"x" * 500 + b'"}'


@pytest.mark.parametrize("ids", ["gateway", "random"])
def test_insert_a_batch_into_a_full_store(benchmark, tmp_path, ids):
    store = LogStore(str(tmp_path / "logs.db"), retention_rows=100_000)
    counter = itertools.count()
    prefix = secrets.token_hex(8)

    def trace_id() -> str:
        return secrets.token_hex(16) if ids == "random" else f"{prefix}{next(counter):016x}"

    def batch() -> list[tuple]:
        return [(1.0, "default", trace_id(), 200, "vendorA", "gpt-4o-mini", DOC) for _ in range(BATCH)]

    for _ in range(100_000 // 1000):
        store.insert([row for _ in range(1000 // BATCH + 1) for row in batch()][:1000])
    batches = iter([batch() for _ in range(400)])
    benchmark.pedantic(lambda: store.insert(next(batches)), rounds=300, iterations=1, warmup_rounds=20)
    if benchmark.stats:
        per_row = benchmark.stats.stats.median / BATCH * 1e6
        benchmark.extra_info["insert_us_per_row"] = per_row
        print(f"\ninsert, {ids} trace ids: {per_row:.2f} us per row")
    store.close()
