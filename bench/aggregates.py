"""How long ``GET /v1/logs/aggregates`` takes to compute at 1 million stored requests.

Fills a fresh ``logs.db`` through the recorder's own write path (``LogStore.insert`` and ``RollupStore.add``, in
batches of 512 like the recorder) with ``--rows`` requests spread evenly over the last ``--span-hours`` (default:
the whole last day, so the day window covers every row), over several workspaces, providers, models and statuses,
then times the report of each window (all workspaces, and one workspace), median and max of ``--repeat`` runs. For
scale it also times the obvious query straight on the raw rows (count, average latency and errors per provider and
model for the day, with an index on the timestamp). Prints one JSON document.

The fill's per-row rollup cost is not what a gateway pays: to fill quickly each batch here spans minutes (many
slots and groups), where a busy worker's batch spans a fraction of a second; ``bench/micro/test_rollups_bench.py``
measures that per-record cost.

    python bench/aggregates.py                   # 1,000,000 rows, about 2 minutes on 2 cores
    python bench/aggregates.py --rows 100000     # quicker
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.observability.aggregates import report
from gateway.observability.logstore import LogStore
from gateway.observability.rollups import WINDOWS, RequestStats, RollupStore

BATCH = 512
MODELS = {"vendorA": ["gpt-4o", "gpt-4o-mini", "o3-mini"], "anthropic": ["claude-3-5-sonnet", "claude-3-5-haiku"],
          "cloudA": ["amazon.nova-pro"], "groq": ["llama-3.3-70b"]}
STATUSES = [200] * 95 + [429, 429, 500, 502, 400]
WORKSPACES = ["default", "team-a", "team-b", "team-c"]


def fill(path: str, rows: int, span_s: float, now: float, seed: int = 1) -> dict:
    rng = random.Random(seed)
    store = LogStore(path, retention_rows=rows + 1)
    rollups = RollupStore(path)
    pairs = [(p, m) for p, models in MODELS.items() for m in models]
    encode = msgspec.json.encode
    started = time.perf_counter()
    store_s = rollup_s = 0.0
    for first in range(0, rows, BATCH):
        count = min(BATCH, rows - first)
        log_rows, stats = [], []
        for i in range(first, first + count):
            ts = now - span_s + span_s * i / rows
            provider, model = pairs[rng.randrange(len(pairs))]
            status = STATUSES[rng.randrange(len(STATUSES))]
            workspace = WORKSPACES[i % len(WORKSPACES)]
            latency = rng.lognormvariate(6, 0.8)
            added = rng.uniform(0.3, 1.5)
            tin, tout = rng.randrange(10, 2000), rng.randrange(1, 800)
            trace = f"{i:032x}"
            doc = encode({"time": "", "timestamp": ts, "trace_id": trace, "workspace": workspace,
                          "endpoint": "chat", "provider": provider, "model": model, "status": status,
                          "latency_ms": latency, "gateway_latency_ms": added, "prompt_tokens": tin,
                          "completion_tokens": tout, "total_tokens": tin + tout, "cost_usd": 0.0001})
            log_rows.append((ts, workspace, trace, status, provider, model, doc))
            stats.append(RequestStats(ts, workspace, provider, model, status, latency, added, tin, tout, 0.0001))
        t0 = time.perf_counter()
        store.insert(log_rows)
        t1 = time.perf_counter()
        rollups.add(stats, now=ts)
        rollup_s += time.perf_counter() - t1
        store_s += t1 - t0
        if first and first % 100_000 < BATCH:
            print(f"[aggregates] {first} rows", file=sys.stderr, flush=True)
    store.close()
    rollups.close()
    total = time.perf_counter() - started
    return {"rows": rows, "fill_s": round(total, 1), "log_insert_us_per_row": round(store_s / rows * 1e6, 2),
            "rollup_us_per_row_in_fill": round(rollup_s / rows * 1e6, 2)}


def timed(fn, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(runs), 2), "max_ms": round(max(runs), 2)}


def raw_day_query(path: str, since: float) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "SELECT provider, model, COUNT(*),"
            " AVG(json_extract(CAST(doc AS TEXT), '$.latency_ms')), SUM(status >= 400)"
            " FROM request_logs WHERE ts >= ? GROUP BY 1, 2", (since,)).fetchall()
    finally:
        conn.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--span-hours", type=float, default=23.5)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--raw-repeat", type=int, default=3)
    args = p.parse_args()
    folder = tempfile.mkdtemp(prefix="gw-bench-aggregates-")
    path = str(Path(folder) / "logs.db")
    now = time.time()
    out: dict = {"fill": fill(path, args.rows, args.span_hours * 3600, now)}
    rollups = RollupStore(path)
    db = sqlite3.connect(path)
    out["rollup_rows"] = {table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                          for table in ("log_rollups", "log_latency", "log_slot_latency")}
    db.close()
    out["db_mb"] = round(Path(path).stat().st_size / 1e6, 1)
    queries = {}
    for window in WINDOWS:
        got = report(rollups, window, None)
        queries[window] = {"requests": got.totals.requests,
                           "all_workspaces": timed(lambda w=window: report(rollups, w, None), args.repeat),
                           "one_workspace": timed(lambda w=window: report(rollups, w, "team-a"), args.repeat)}
    out["report"] = queries
    conn = sqlite3.connect(path)
    conn.execute("CREATE INDEX IF NOT EXISTS bench_request_logs_ts ON request_logs (ts)")
    conn.close()
    out["raw_day_query_for_scale"] = timed(lambda: raw_day_query(path, now - 86400), args.raw_repeat)
    rollups.close()
    shutil.rmtree(folder, ignore_errors=True)
    print(msgspec.json.format(msgspec.json.encode(out), indent=2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
