"""The record watcher: subscribers hear of every record change, made by any worker or instance, within a second."""

from __future__ import annotations

import asyncio
import sqlite3
import time

from gateway.state.base import StateStoreUnavailable
from gateway.state.memory import MemoryStateStore
from gateway.state.redis import RedisStateStore
from gateway.state.sqlite import SQLiteStateStore
from gateway.state.watch import RecordWatcher
from tests.support.poll import await_for
from tests.support.redis_servers import delete_prefix, random_prefix, test_redis_url


async def test_subscribers_hear_of_puts_and_deletes(store):
    watcher = RecordWatcher(store, interval_ms=50)
    heard: list[int] = []
    watcher.subscribe(lambda: heard.append(1))
    await watcher.start()
    try:
        await store.record_put("key", "k1", "ws", b"doc")
        assert len(heard) == 1  # written through this store: told at once
        await await_for(lambda: len(heard) == 2, 5)  # and by the poll (as any worker is)
        await store.record_delete("key", "k1")
        await await_for(lambda: len(heard) == 4, 5)
        await asyncio.sleep(0.2)
        assert len(heard) == 4  # nothing changed since: no further calls
    finally:
        await watcher.close()


async def check_another_worker_is_heard(writer, reader) -> None:
    watcher = RecordWatcher(reader, interval_ms=250)
    heard: list[float] = []
    watcher.subscribe(lambda: heard.append(time.monotonic()))
    await watcher.start()
    try:
        written = time.monotonic()
        await writer.record_put("key", "revoked", "ws", b"{}")
        await await_for(lambda: bool(heard), 10)
        assert heard[0] - written < 5  # about 250 ms; generous on a busy machine
    finally:
        await watcher.close()


async def test_a_change_made_by_another_worker_is_heard(tmp_path):
    a = SQLiteStateStore(str(tmp_path / "state.db"), str(tmp_path / "cache.db"))
    b = SQLiteStateStore(str(tmp_path / "state.db"), str(tmp_path / "cache.db"))
    await a.start()
    await b.start()
    try:
        await check_another_worker_is_heard(a, b)
    finally:
        await a.close()
        await b.close()


async def test_a_change_made_by_another_instance_is_heard():
    url, prefix = test_redis_url(), random_prefix()
    a, b = RedisStateStore(url, key_prefix=prefix), RedisStateStore(url, key_prefix=prefix)
    await a.start()
    await b.start()
    try:
        await check_another_worker_is_heard(a, b)
    finally:
        await delete_prefix(a._client, prefix)
        await a.close()
        await b.close()


class FlakyVersionStore(MemoryStateStore):
    down = False

    async def record_versions(self, kinds):
        if self.down:
            raise StateStoreUnavailable("down")
        return await super().record_versions(kinds)


async def test_subscribers_hear_after_an_outage_even_when_the_version_looks_unchanged():
    store = FlakyVersionStore()
    watcher = RecordWatcher(store)
    heard: list[int] = []
    watcher.subscribe(lambda: heard.append(1))
    await watcher.poll()
    store.down = True
    assert not await watcher.poll()
    store.down = False
    assert await watcher.poll()
    assert heard == [1]


async def test_a_failing_subscriber_does_not_starve_the_others():
    store = MemoryStateStore()
    watcher = RecordWatcher(store)
    heard: list[int] = []

    def broken() -> None:
        raise RuntimeError("bug")

    watcher.subscribe(broken)
    watcher.subscribe(lambda: heard.append(1))
    await watcher.poll()
    await store.record_put("k", "1", "ws", b"")
    assert heard == [1]  # a write through this worker's store is told at once
    assert await watcher.poll()
    assert heard == [1, 1]  # and the poll tells again (it cannot tell this write from another worker's)


async def test_no_store_calls_while_nobody_subscribed():
    calls: list[int] = []

    class Counting(MemoryStateStore):
        async def record_versions(self, kinds):
            calls.append(1)
            return await super().record_versions(kinds)

    watcher = RecordWatcher(Counting(), interval_ms=10)
    await watcher.start()  # one read: the baseline
    await asyncio.sleep(0.2)
    await watcher.close()
    assert len(calls) == 1


async def _two_workers(tmp_path) -> tuple[SQLiteStateStore, SQLiteStateStore]:
    a = SQLiteStateStore(str(tmp_path / "state.db"), str(tmp_path / "cache.db"))
    b = SQLiteStateStore(str(tmp_path / "state.db"), str(tmp_path / "cache.db"))
    await a.start()
    await b.start()
    return a, b


async def test_a_subscriber_hears_only_of_the_kinds_it_follows(tmp_path):
    writer, reader = await _two_workers(tmp_path)
    watcher = RecordWatcher(reader)
    keys: list[int] = []
    everything: list[int] = []
    watcher.subscribe(lambda: keys.append(1), ("api_key_secret",))
    watcher.subscribe(lambda: everything.append(1))
    try:
        await watcher.poll()
        await writer.record_put("file", "file-1", "other-team", b"{}")  # another worker, another tenant
        await writer.record_put("batch", "batch-1", "other-team", b"{}")
        assert await watcher.poll()
        assert keys == [] and everything == [1]
        await writer.record_delete("file", "file-1")
        await watcher.poll()
        assert keys == [] and everything == [1, 1]
        await writer.record_put("api_key_secret", "hash", "team", b"{}")
        await watcher.poll()
        assert keys == [1] and everything == [1, 1, 1]
    finally:
        await writer.close()
        await reader.close()


async def test_a_kind_followed_after_the_start_hears_of_a_change_since_the_last_read(tmp_path):
    writer, reader = await _two_workers(tmp_path)
    watcher = RecordWatcher(reader)
    heard: list[int] = []
    watcher.subscribe(lambda: None, ("config",))
    try:
        await watcher.poll()
        watcher.subscribe(lambda: heard.append(1), ("guardrail",))  # no count of its own read yet
        await writer.record_put("guardrail", "g", "ws", b"{}")
        await watcher.poll()
        assert heard == [1]
        await writer.record_put("config", "c", "ws", b"{}")
        await watcher.poll()
        assert heard == [1]  # from then on, only its own kind
    finally:
        await writer.close()
        await reader.close()


async def test_a_change_counted_by_an_older_release_reaches_every_subscriber(tmp_path):
    writer, reader = await _two_workers(tmp_path)
    watcher = RecordWatcher(reader)
    heard: list[int] = []
    watcher.subscribe(lambda: heard.append(1), ("api_key_secret",))
    try:
        await watcher.poll()
        await writer.record_put("file", "f", "ws", b"{}")
        with sqlite3.connect(tmp_path / "state.db") as conn:  # what an older release's write counts: the total only
            conn.execute("UPDATE meta SET value = value + 1 WHERE name = 'records_version'")
        assert await watcher.poll()
        assert heard == [1]
    finally:
        await writer.close()
        await reader.close()


async def test_an_older_release_writing_to_the_same_redis_is_heard_too():
    url, prefix = test_redis_url(), random_prefix()
    store = RedisStateStore(url, key_prefix=prefix)
    await store.start()
    watcher = RecordWatcher(store)
    heard: list[int] = []
    watcher.subscribe(lambda: heard.append(1), ("api_key_secret",))
    try:
        await watcher.poll()
        await store.record_put("file", "f", "ws", b"{}")
        await watcher.poll()
        assert heard == []
        await store._client.incr(prefix + "{rec}:v")  # an older release's write bumps the total only
        assert await watcher.poll()
        assert heard == [1]
    finally:
        await delete_prefix(store._client, prefix)
        await store.close()
