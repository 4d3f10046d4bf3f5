"""The PostgreSQL log store: records written per second per instance, and ``GET /v1/logs/aggregates`` over a day at
1 million (or, with ``--rows 10000000``, 10 million) stored requests.

Needs a PostgreSQL: ``--url`` or ``GATEWAY_TEST_POSTGRES_URL`` (``eval "$(tests/support/postgres.sh)"`` starts a
private one); each run creates a database of its own and drops it at the end.

- ``write``: one writer as each worker runs it (``PgLogStore.write``: ``COPY`` into staging, insert, rollups summed
  in SQL, ``NOTIFY``), in batches of ``--batch`` (the writer's 2,000) for ``--records``; then ``--writers`` at once
  (several workers or instances on one database). Records per second, and milliseconds per batch. ``--trace-ids
  random`` writes random trace ids (as clients' W3C ``traceparent`` headers bring) instead of ids in order.
- ``aggregates``: fills ``--rows`` requests spread over the last ``--span-hours`` through the same write path
  (several workspaces, providers, models, statuses), then times the report of each window, all workspaces and one,
  median and max of ``--repeat`` runs; for scale also the obvious query on the raw rows (the day, per provider and
  model).

    python bench/pglog.py write                          # 200,000 records, then 2 writers at once
    python bench/pglog.py aggregates                     # 1,000,000 requests (about a minute to fill)
    python bench/pglog.py aggregates --rows 10000000     # 10 million (a person runs it: about 10 minutes to fill)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.observability.pglog.aggregates import shared_report
from gateway.observability.pglog.store import PgLogStore
from gateway.observability.rollups import WINDOWS, bucket

MODELS = {"vendorA": ["gpt-4o", "gpt-4o-mini", "o3-mini"], "anthropic": ["claude-3-5-sonnet", "claude-3-5-haiku"],
          "cloudA": ["amazon.nova-pro"], "groq": ["llama-3.3-70b"]}
STATUSES = [200] * 95 + [429, 429, 500, 502, 400]
WORKSPACES = ["default", "team-a", "team-b", "team-c"]
PAIRS = [(p, m) for p, models in MODELS.items() for m in models]
_encode = msgspec.json.encode


def records(start: int, count: int, total: int, span_s: float, now: float, rng: random.Random,
            random_traces: bool = False) -> list[tuple]:
    out = []
    token = uuid.uuid4().hex[:16]
    for i in range(start, start + count):
        ts = now - span_s + span_s * i / total
        provider, model = PAIRS[rng.randrange(len(PAIRS))]
        status = STATUSES[rng.randrange(len(STATUSES))]
        workspace = WORKSPACES[i % len(WORKSPACES)]
        latency = rng.lognormvariate(6, 0.8)
        added = rng.uniform(0.3, 1.5)
        tin, tout = rng.randrange(10, 2000), rng.randrange(1, 800)
        trace = f"{rng.getrandbits(128):032x}" if random_traces else f"{i:032x}"
        doc = _encode({"time": "", "timestamp": ts, "trace_id": trace, "workspace": workspace, "endpoint": "chat",
                       "provider": provider, "model": model, "status": status, "latency_ms": latency,
                       "gateway_latency_ms": added, "prompt_tokens": tin, "completion_tokens": tout,
                       "total_tokens": tin + tout, "cost_usd": 0.0001, "cache_status": "DISABLED"})
        out.append((f"{token}-{i:x}", ts, workspace, trace, status, provider, model, latency, added, tin, tout,
                    0.0001, bucket(latency), bucket(added), doc))
    return out


async def write_run(url: str, total: int, batch: int, span_s: float, now: float, seed: int,
                    random_traces: bool = False) -> float:
    """Write ``total`` records through one store; returns the seconds spent in ``write`` only."""
    store = PgLogStore(url)
    store._last_prune = time.time() + 3600  # no retention pass inside the timing
    rng = random.Random(seed)
    spent = 0.0
    try:
        for first in range(0, total, batch):
            chunk = records(first, min(batch, total - first), total, span_s, now, rng, random_traces)
            t0 = time.perf_counter()
            await store.write(chunk)
            spent += time.perf_counter() - t0
            if first and first % 500_000 < batch:
                print(f"[pglog] {first} records", file=sys.stderr, flush=True)
    finally:
        await store.close()
    return spent


def timed_ms(runs: list[float]) -> dict:
    return {"median_ms": round(statistics.median(runs), 2), "max_ms": round(max(runs), 2)}


async def bench_write(url: str, args: argparse.Namespace) -> dict:
    now = time.time()
    random_traces = args.trace_ids == "random"
    one = await write_run(url, args.records, args.batch, 60.0, now, 1, random_traces)
    started = time.perf_counter()
    each = args.records // args.writers
    await asyncio.gather(*(write_run(url, each, args.batch, 60.0, now, 10 + i, random_traces)
                           for i in range(args.writers)))
    together = time.perf_counter() - started
    return {
        "batch": args.batch,
        "trace_ids": args.trace_ids,
        "one_writer": {"records": args.records, "records_per_s": round(args.records / one),
                       "ms_per_batch": round(one / (args.records / args.batch) * 1000, 2)},
        f"{args.writers}_writers_at_once": {"records": each * args.writers,
                                            "records_per_s_total": round(each * args.writers / together),
                                            "records_per_s_each": round(each / together)},
    }


async def bench_aggregates(url: str, args: argparse.Namespace) -> dict:
    now = time.time()
    t0 = time.perf_counter()
    spent = await write_run(url, args.rows, args.batch, args.span_hours * 3600, now, 1)
    out: dict = {"fill": {"rows": args.rows, "fill_s": round(time.perf_counter() - t0, 1),
                          "write_records_per_s": round(args.rows / spent)}}
    conn = await asyncpg.connect(url)
    try:
        out["rollup_rows"] = {t: await conn.fetchval(f"SELECT count(*) FROM gateway.{t}")
                              for t in ("log_rollups", "log_hist")}
        out["db_mb"] = round(await conn.fetchval("SELECT pg_database_size(current_database())") / 1e6, 1)
        raw = []
        for _ in range(args.raw_repeat):
            t1 = time.perf_counter()
            await conn.fetch("SELECT provider, model, count(*), sum((status >= 400)::int) FROM gateway.request_logs"
                             " WHERE ts >= $1 GROUP BY 1, 2", now - 86400)
            raw.append((time.perf_counter() - t1) * 1000)
        out["raw_day_query_for_scale"] = timed_ms(raw)
    finally:
        await conn.close()
    store = PgLogStore(url)
    try:
        queries = {}
        for window in WINDOWS:
            got = await shared_report(store, window, None)
            timings: dict = {}
            for name, workspace in (("all_workspaces", None), ("one_workspace", "team-a")):
                runs = []
                for _ in range(args.repeat):
                    t1 = time.perf_counter()
                    await shared_report(store, window, workspace)
                    runs.append((time.perf_counter() - t1) * 1000)
                timings[name] = timed_ms(runs)
            queries[window] = {"requests": got.totals.requests, **timings}
        out["report"] = queries
    finally:
        await store.close()
    return out


async def main_async(args: argparse.Namespace) -> dict:
    base = args.url or os.environ.get("GATEWAY_TEST_POSTGRES_URL")
    if not base:
        raise SystemExit("set --url or GATEWAY_TEST_POSTGRES_URL (eval \"$(tests/support/postgres.sh)\")")
    name = f"gwbench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(base)
    await admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(base)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    try:
        if args.what == "write":
            return await bench_write(url, args)
        return await bench_aggregates(url, args)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("write", "aggregates"))
    p.add_argument("--url", default=None)
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--span-hours", type=float, default=23.5)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--raw-repeat", type=int, default=3)
    p.add_argument("--trace-ids", choices=("gateway", "random"), default="gateway",
                   help="write: trace ids in order, as the gateway makes them, or random, as clients' traceparents")
    args = p.parse_args()
    out = asyncio.run(main_async(args))
    print(msgspec.json.format(msgspec.json.encode(out), indent=2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
