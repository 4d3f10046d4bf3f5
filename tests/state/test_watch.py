"""The record watcher: subscribers hear of every record change, made by any worker or instance, within a second."""

from __future__ import annotations

import asyncio
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
        await await_for(lambda: len(heard) == 1, 5)
        await store.record_delete("key", "k1")
        await await_for(lambda: len(heard) == 2, 5)
        await asyncio.sleep(0.2)
        assert len(heard) == 2  # nothing changed since: no further calls
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

    async def records_version(self) -> int:
        if self.down:
            raise StateStoreUnavailable("down")
        return await super().records_version()


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
    assert await watcher.poll()
    assert heard == [1]


async def test_no_store_calls_while_nobody_subscribed():
    calls: list[int] = []

    class Counting(MemoryStateStore):
        async def records_version(self) -> int:
            calls.append(1)
            return 0

    watcher = RecordWatcher(Counting(), interval_ms=10)
    await watcher.start()  # one read: the baseline
    await asyncio.sleep(0.2)
    await watcher.close()
    assert len(calls) == 1
