"""What one state-store call costs a worker, per backend (memory, embedded SQLite, Redis on loopback).

Run with ``python -m pytest bench/micro/test_state_bench.py --benchmark-enable -s``; each benchmark awaits
``PER_CALL`` sequential calls on a uvloop loop (as a worker does) and prints the median per call. The calls
measured are the ones a request pays: a KV/cache ``get``, a budget ``reserve`` (two counters, with a
reservation id), its ``settle``, and a breaker check (``breaker_open_until``). Redis comes from
GATEWAY_TEST_REDIS_URL (keys under a random prefix, deleted afterwards).
"""

from __future__ import annotations

import itertools
import tempfile

import pytest
import uvloop

from gateway.state.base import BudgetItem
from gateway.state.memory import MemoryStateStore
from gateway.state.redis import RedisStateStore
from gateway.state.sqlite import SQLiteStateStore
from tests.support.redis_servers import delete_prefix, random_prefix, test_redis_url

PER_CALL = 200
ITEMS = [BudgetItem("rpm:1", 10**12, 1, 120_000), BudgetItem("tpm:1", 10**12, 500, 120_000)]
_ids = itertools.count()


@pytest.fixture(params=["memory", "embedded", "redis"])
def store_on_loop(request):
    loop = uvloop.new_event_loop()
    if request.param == "memory":
        store = MemoryStateStore()
    elif request.param == "embedded":
        folder = tempfile.mkdtemp(prefix="gw-bench-")
        store = SQLiteStateStore(folder + "/state.db", folder + "/cache.db")
    else:
        store = RedisStateStore(test_redis_url(), key_prefix=random_prefix())
    loop.run_until_complete(store.start())
    yield request.param, store, loop
    if request.param == "redis":
        loop.run_until_complete(delete_prefix(store._client, store.prefix))
    loop.run_until_complete(store.close())
    loop.close()


def report(benchmark, backend: str, name: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # --benchmark-disable: ran once, nothing measured
        return
    per_call_us = stats.stats.median / PER_CALL * 1e6
    benchmark.extra_info["per_call_us"] = round(per_call_us, 1)
    print(f"\n{backend:9s} {name:22s} {per_call_us:8.1f} us per call")


def test_get(benchmark, store_on_loop):
    backend, store, loop = store_on_loop
    loop.run_until_complete(store.set("k", b"v" * 64))

    async def calls() -> None:
        for _ in range(PER_CALL):
            await store.get("k")

    benchmark(lambda: loop.run_until_complete(calls()))
    report(benchmark, backend, "get")


def test_reserve(benchmark, store_on_loop):
    backend, store, loop = store_on_loop

    async def calls() -> None:
        for _ in range(PER_CALL):
            await store.reserve("ws", ITEMS, f"r{next(_ids)}", 60_000)

    benchmark(lambda: loop.run_until_complete(calls()))
    report(benchmark, backend, "reserve (2 counters)")


def test_settle(benchmark, store_on_loop):
    backend, store, loop = store_on_loop

    def setup():
        ids = [f"s{next(_ids)}" for _ in range(PER_CALL)]

        async def reserve_all() -> None:
            for rid in ids:
                await store.reserve("ws", ITEMS, rid, 60_000)

        loop.run_until_complete(reserve_all())
        return (ids,), {}

    async def settle_all(ids: list[str]) -> None:
        for rid in ids:
            await store.settle("ws", rid, ITEMS, [1, 320])

    benchmark.pedantic(lambda ids: loop.run_until_complete(settle_all(ids)), setup=setup, rounds=10)
    report(benchmark, backend, "settle (2 counters)")


def test_breaker_check(benchmark, store_on_loop):
    backend, store, loop = store_on_loop
    loop.run_until_complete(store.breaker_failure("t", 5, 30_000, 30_000, 1))

    async def calls() -> None:
        for _ in range(PER_CALL):
            await store.breaker_open_until("t")

    benchmark(lambda: loop.run_until_complete(calls()))
    report(benchmark, backend, "breaker check")
