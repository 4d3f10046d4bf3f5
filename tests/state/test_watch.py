"""The record watcher: subscribers hear of every record change, made by any worker or instance, within a second."""

from __future__ import annotations

import asyncio
import sqlite3
import time

from gateway.state.base import RECORD_CHANGE_LOG, StateStoreUnavailable
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

    async def record_versions(self, kinds, since=()):
        if self.down:
            raise StateStoreUnavailable("down")
        return await super().record_versions(kinds, since)


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
        async def record_versions(self, kinds, since=()):
            calls.append(1)
            return await super().record_versions(kinds, since)

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


class PerRecord:
    """A per-record subscriber's record of what it was told."""

    def __init__(self) -> None:
        self.forgotten: list[dict[str, frozenset[str]]] = []
        self.dropped_all = 0

    def forget(self, changed) -> None:
        self.forgotten.append(dict(changed))

    def drop_all(self) -> None:
        self.dropped_all += 1


async def test_a_per_record_subscriber_is_told_which_records_changed_here_and_elsewhere(tmp_path):
    writer, reader = await _two_workers(tmp_path)
    watcher = RecordWatcher(reader)
    told = PerRecord()
    watcher.subscribe(told.drop_all, ("api_key_secret",), forget=told.forget)
    try:
        await watcher.poll()
        await writer.record_put("api_key_secret", "hash-1", "other-team", b"{}")  # another worker
        await writer.record_delete("api_key_secret", "hash-1")
        await writer.record_put("api_key_secret", "hash-2", "other-team", b"{}")
        await writer.record_put("file", "file-1", "other-team", b"{}")
        assert await watcher.poll()
        assert told.forgotten == [{"api_key_secret": frozenset({"hash-1", "hash-2"})}] and told.dropped_all == 0
        await reader.record_delete("api_key_secret", "hash-2")  # this worker: told at once, before the poll
        assert told.forgotten[-1] == {"api_key_secret": frozenset({"hash-2"})}
        await watcher.poll()
        assert told.dropped_all == 0
    finally:
        await writer.close()
        await reader.close()


async def test_past_the_change_log_a_per_record_subscriber_drops_everything(tmp_path):
    writer, reader = await _two_workers(tmp_path)
    watcher = RecordWatcher(reader)
    told = PerRecord()
    watcher.subscribe(told.drop_all, ("api_key_secret",), forget=told.forget)
    try:
        await watcher.poll()
        for i in range(RECORD_CHANGE_LOG + 1):  # more changes between two polls than the log keeps
            await writer.record_put("api_key_secret", f"hash-{i}", "ws", b"{}")
        assert await watcher.poll()
        assert told.dropped_all == 1 and told.forgotten == []
        await writer.record_put("api_key_secret", "hash-x", "ws", b"{}")
        await watcher.poll()
        assert told.forgotten == [{"api_key_secret": frozenset({"hash-x"})}]  # back to per record
    finally:
        await writer.close()
        await reader.close()


async def test_a_change_an_older_release_counted_but_did_not_log_drops_everything(tmp_path):
    writer, reader = await _two_workers(tmp_path)
    watcher = RecordWatcher(reader)
    told = PerRecord()
    watcher.subscribe(told.drop_all, ("api_key_secret",), forget=told.forget)
    try:
        await watcher.poll()
        await writer.record_put("api_key_secret", "hash-1", "ws", b"{}")
        with sqlite3.connect(tmp_path / "state.db") as conn:  # a release that counted kinds but logged no ids
            for name in ("records_version", "records_version_kinded", "records_version:api_key_secret"):
                conn.execute("UPDATE meta SET value = value + 1 WHERE name = ?", (name,))
        assert await watcher.poll()
        assert told.dropped_all == 1 and told.forgotten == []
    finally:
        await writer.close()
        await reader.close()


async def test_after_an_outage_a_per_record_subscriber_drops_everything():
    store = FlakyVersionStore()
    watcher = RecordWatcher(store)
    told = PerRecord()
    watcher.subscribe(told.drop_all, ("api_key_secret",), forget=told.forget)
    await watcher.poll()
    store.down = True
    assert not await watcher.poll()
    store.down = False
    assert await watcher.poll()
    assert told.dropped_all == 1 and told.forgotten == []


async def test_redis_hands_the_changed_records_to_a_per_record_subscriber_in_one_call():
    url, prefix = test_redis_url(), random_prefix()
    writer, reader = RedisStateStore(url, key_prefix=prefix), RedisStateStore(url, key_prefix=prefix)
    await writer.start()
    await reader.start()
    watcher = RecordWatcher(reader)
    told = PerRecord()
    watcher.subscribe(told.drop_all, ("api_key_secret",), forget=told.forget)
    try:
        await watcher.poll()
        await writer.record_put("api_key_secret", "hash-1", "ws", b"{}")
        await writer.record_put("api_key_secret", "hash-2", "ws", b"{}")
        assert await watcher.poll()
        assert told.forgotten == [{"api_key_secret": frozenset({"hash-1", "hash-2"})}] and told.dropped_all == 0
        await writer._client.incr(prefix + "{rec}:vk:api_key_secret")  # counted, never logged
        await writer._client.incr(prefix + "{rec}:vk")
        await writer._client.incr(prefix + "{rec}:v")
        await watcher.poll()
        assert told.dropped_all == 1
    finally:
        await delete_prefix(writer._client, prefix)
        await writer.close()
        await reader.close()
