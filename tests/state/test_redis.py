"""The Redis store's own promises: exact across processes, cluster URLs, bounded failure and automatic
reconnection (against private redis-server processes the tests stop and restart)."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.observability.metrics import STATE_STORE_ERRORS
from gateway.state.base import BudgetItem, StateStoreUnavailable
from gateway.state.redis import RedisStateStore, is_cluster_url, parse_cluster_url
from tests.support.redis_servers import RedisProcess, delete_prefix, random_prefix, test_redis_url
from tests.support.state_race import admitted_across_processes


async def test_concurrent_reserves_in_two_processes_admit_exactly_the_limit():
    url, prefix = test_redis_url(), random_prefix()
    spec = {"backend": "redis", "url": url, "prefix": prefix, "scope": "ws", "key": "rpm:1", "limit": 25, "n": 40}
    assert await asyncio.to_thread(admitted_across_processes, spec) == 25
    store = RedisStateStore(url, key_prefix=prefix)
    await store.start()
    try:
        assert await store.usage("ws", ["rpm:1"]) == [25]
    finally:
        await delete_prefix(store._client, prefix)
        await store.close()


def test_cluster_urls_name_every_node_and_credentials():
    assert is_cluster_url("redis+cluster://a:7000") and not is_cluster_url("redis://a:6379/0")
    assert parse_cluster_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7001") == (
        [("10.0.0.1", 7000), ("10.0.0.2", 7001)], None, None, False)
    assert parse_cluster_url("rediss+cluster://user:p%40ss@h1:7000,h2") == (
        [("h1", 7000), ("h2", 6379)], "user", "p@ss", True)
    with pytest.raises(ValueError):
        parse_cluster_url("redis+cluster://:7000")


def test_a_prefix_with_braces_is_refused():
    with pytest.raises(ValueError):
        RedisStateStore("redis://127.0.0.1:6379/0", key_prefix="{gw}:")


def errors_counted(store: RedisStateStore, operation: str) -> float:
    return store.metrics.pending(STATE_STORE_ERRORS, ("redis", operation))


async def test_an_unreachable_redis_fails_fast_and_reconnects_when_it_comes_up():
    server = RedisProcess()  # port reserved, not started yet
    store = RedisStateStore(server.url, key_prefix=random_prefix(), timeout_ms=2000, probe_interval_ms=100)
    await store.start()
    try:
        assert not store.healthy
        before = errors_counted(store, "reserve")
        started = time.monotonic()
        with pytest.raises(StateStoreUnavailable):
            await store.reserve("ws", [BudgetItem("k", 1, 1, 60_000)])
        assert time.monotonic() - started < 5  # no wait on a dead server (generous bound)
        assert errors_counted(store, "reserve") == before + 1
        server.start()
        deadline = time.monotonic() + 20
        while not store.healthy and time.monotonic() < deadline:  # noqa: ASYNC110 - the store's probe flips it
            await asyncio.sleep(0.05)
        assert store.healthy
        assert (await store.reserve("ws", [BudgetItem("k", 1, 1, 60_000)])).admitted
    finally:
        await store.close()
        server.stop()


async def test_a_redis_restart_is_survived_without_restarting_the_gateway():
    server = RedisProcess().start()
    store = RedisStateStore(server.url, key_prefix=random_prefix(), timeout_ms=2000, probe_interval_ms=100)
    await store.start()
    try:
        await store.set("k", b"before")
        server.stop()
        with pytest.raises(StateStoreUnavailable):
            for _ in range(3):  # pooled connections notice the dead server
                await store.set("k", b"during")
        assert not store.healthy
        server.start()
        deadline = time.monotonic() + 20
        while not store.healthy and time.monotonic() < deadline:  # noqa: ASYNC110 - the store's probe flips it
            await asyncio.sleep(0.05)
        assert store.healthy
        await store.set("k", b"after")  # a fresh connection; no persistence, so 'before' is gone
        assert await store.get("k") == b"after"
    finally:
        await store.close()
        server.stop()


async def test_a_cluster_unreachable_at_start_does_not_stop_the_gateway():
    port = RedisProcess().port  # free, nothing listening
    store = RedisStateStore(f"redis+cluster://127.0.0.1:{port}", key_prefix=random_prefix(), timeout_ms=200)
    await store.start()
    try:
        assert not store.healthy and store.backend == "redis-cluster"
        with pytest.raises(StateStoreUnavailable):
            await store.get("k")
    finally:
        await store.close()
