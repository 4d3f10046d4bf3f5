"""The embedded store's own promises: exact across processes, shared by the workers of a machine, a bounded LRU
cache, durable records, and no SQLite call on the event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.state import sqlite_ops
from gateway.state.base import BudgetItem
from gateway.state.sqlite import SQLiteStateStore
from gateway.waiting import within
from tests.support.state_race import admitted_across_processes


def open_store(path, **kwargs) -> SQLiteStateStore:
    return SQLiteStateStore(str(path / "state.db"), str(path / "cache.db"), **kwargs)


async def test_concurrent_reserves_in_two_processes_admit_exactly_the_limit(tmp_path):
    spec = {"backend": "embedded", "dir": str(tmp_path), "scope": "ws", "key": "rpm:1", "limit": 25, "n": 40}
    assert await asyncio.to_thread(admitted_across_processes, spec) == 25
    store = open_store(tmp_path)
    await store.start()
    try:
        assert await store.usage("ws", ["rpm:1"]) == [25]
    finally:
        await store.close()


@pytest.fixture
async def two_workers(tmp_path):
    """Two stores on the same files: what two worker processes of one machine see."""
    a, b = open_store(tmp_path, cache_touch_ms=0), open_store(tmp_path, cache_touch_ms=0)
    await a.start()
    await b.start()
    yield a, b
    await a.close()
    await b.close()


async def test_workers_share_counters_breakers_records_and_cache(two_workers):
    a, b = two_workers
    assert (await a.reserve("ws", [BudgetItem("k", 1, 1, 60_000)])).admitted
    assert not (await b.reserve("ws", [BudgetItem("k", 1, 1, 60_000)])).admitted
    assert await a.breaker_failure("t", 1, 30_000, 30_000, 1000)
    assert await b.breaker_open_until("t") == 31_000
    version = await a.record_put("key", "k1", "ws", b"doc")
    assert await b.records_version() == version
    assert (await b.record_get("key", "k1")).doc == b"doc"
    await b.cache_set("c", b"answer", 60_000)
    assert await a.cache_get("c") == b"answer"


async def test_the_cache_bound_holds_across_workers_and_evicts_the_least_recently_used(tmp_path):
    a, b = open_store(tmp_path, cache_max_entries=3, cache_touch_ms=0), \
        open_store(tmp_path, cache_max_entries=3, cache_touch_ms=0)
    await a.start()
    await b.start()
    try:
        await a.cache_set("k1", b"v", 60_000)
        await asyncio.sleep(0.01)
        await b.cache_set("k2", b"v", 60_000)
        await asyncio.sleep(0.01)
        await a.cache_set("k3", b"v", 60_000)
        await asyncio.sleep(0.01)
        assert await b.cache_get("k1") == b"v"  # k1 is now more recent than k2
        await asyncio.sleep(0.01)
        await b.cache_set("k4", b"v", 60_000)
        assert await a.cache_get("k2") is None
        assert [await a.cache_get(k) for k in ("k1", "k3", "k4")] == [b"v"] * 3
    finally:
        await a.close()
        await b.close()


async def test_the_cache_evicts_by_bytes(tmp_path):
    store = open_store(tmp_path, cache_max_bytes=100)
    await store.start()
    try:
        for i in range(3):
            await store.cache_set(f"k{i}", b"x" * 40, 60_000)
            await asyncio.sleep(0.01)
        assert await store.cache_get("k0") is None
        assert await store.cache_get("k2") is not None
        await store.cache_set("huge", b"x" * 101, 60_000)
        assert await store.cache_get("huge") is None
    finally:
        await store.close()


async def test_records_and_counters_survive_a_restart(tmp_path):
    store = open_store(tmp_path)
    await store.start()
    await store.record_put("config", "c1", "ws", b"{}")
    await store.reserve("ws", [BudgetItem("month", 10, 4, 86_400_000)])
    await store.close()
    store = open_store(tmp_path)
    await store.start()
    try:
        assert (await store.record_get("config", "c1")).doc == b"{}"
        assert await store.usage("ws", ["month"]) == [4]
    finally:
        await store.close()


async def test_sqlite_calls_never_run_on_the_event_loop_thread(tmp_path, monkeypatch):
    loop_thread = threading.get_ident()
    seen: list[int] = []
    real = sqlite_ops.reserve

    def spy(*args):
        seen.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(sqlite_ops, "reserve", spy)
    store = open_store(tmp_path)
    await store.start()
    try:
        await store.reserve("ws", [BudgetItem("k", 5, 1, 60_000)])
    finally:
        await store.close()
    assert seen and loop_thread not in seen


async def test_a_held_write_lock_makes_calls_fail_within_the_busy_timeout(tmp_path):
    from gateway.state.base import StateStoreUnavailable

    store = open_store(tmp_path, busy_timeout_ms=100)
    await store.start()
    holder = sqlite_ops.connect(str(tmp_path / "state.db"), 100)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StateStoreUnavailable):
            await within(store.reserve("ws", [BudgetItem("k", 5, 1, 60_000)]), 10)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await store.reserve("ws", [BudgetItem("k", 5, 1, 60_000)])).admitted
    await store.close()
