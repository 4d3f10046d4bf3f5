"""Cached answers in the state store: expiry by the entry's own clock, the writer's and the reader's max_age, size
bound, store failures, writes awaited or in the background."""

from __future__ import annotations

import pytest

from gateway.cache.answers import (
    DEFAULT_MAX_AGE_S,
    MAX_ENTRY_BYTES,
    MAX_MAX_AGE_S,
    CachedAnswer,
    ResponseCache,
    max_age_s,
)
from gateway.state.base import StateStoreUnavailable
from gateway.state.memory import MemoryStateStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_max_age_default_cap_and_zero():
    assert max_age_s(None) == DEFAULT_MAX_AGE_S == 7 * 24 * 3600
    assert max_age_s(10 ** 9) == MAX_MAX_AGE_S == 30 * 24 * 3600
    assert max_age_s(0) == 0 and max_age_s(5) == 5


async def test_an_entry_is_served_until_its_max_age_by_the_injected_clock():
    clock = Clock()
    cache = ResponseCache(MemoryStateStore(), clock)
    assert await cache.put("k", cache.entry(b'{"a":1}', "vendorA", "m", 60))
    found = await cache.get("k", 60)
    assert isinstance(found, CachedAnswer) and found.body == b'{"a":1}' and found.provider == "vendorA"
    clock.now += 59.9
    assert await cache.get("k", 60) is not None
    clock.now += 0.2
    assert await cache.get("k", 60) is None


async def test_a_reader_is_never_served_an_entry_older_than_its_own_max_age():
    clock = Clock()
    cache = ResponseCache(MemoryStateStore(), clock)
    assert await cache.put("k", cache.entry(b"{}", "vendorA", "m", 60))
    assert await cache.get("k", 1) is not None and await cache.get("k", 0) is None
    clock.now += 2.5
    assert await cache.get("k", 1) is None and await cache.get("k", 2) is None  # stored 2.5 s ago
    assert await cache.get("k", 3) is not None and await cache.get("k", DEFAULT_MAX_AGE_S) is not None


async def test_zero_max_age_and_oversized_answers_are_not_stored():
    cache = ResponseCache(MemoryStateStore())
    assert not await cache.put("k", cache.entry(b"{}", "p", None, 0))
    assert not await cache.put("big", cache.entry(b"x" * (MAX_ENTRY_BYTES + 1), "p", None, 60))
    assert await cache.get("k", 60) is None and await cache.get("big", 60) is None


class DownStore(MemoryStateStore):
    async def cache_get(self, key: str) -> bytes | None:
        raise StateStoreUnavailable("down")

    async def cache_set(self, key: str, value: bytes, ttl_ms: int) -> None:
        raise StateStoreUnavailable("down")


async def test_a_store_that_cannot_answer_is_a_miss_and_a_dropped_write():
    cache = ResponseCache(DownStore())
    assert await cache.get("k", 60) is None
    assert not await cache.put("k", cache.entry(b"{}", "p", None, 60))


async def test_writes_land_awaited_or_in_the_background_and_garbage_reads_as_a_miss():
    store = MemoryStateStore()
    cache = ResponseCache(store)
    cache.put_later("k", cache.entry(b'{"b":2}', "p", None, 60))
    await cache.drain()
    assert (await cache.get("k", 60)).body == b'{"b":2}'
    published: list[str] = []

    async def then() -> None:
        published.append("now")

    await cache.put_now("k2", cache.entry(b'{"c":3}', "p", None, 60), then)
    assert (await cache.get("k2", 60)).body == b'{"c":3}' and published == ["now"]  # both done on return
    await store.cache_set("bad", b"\x00not msgpack", 60_000)
    assert await cache.get("bad", 60) is None


@pytest.mark.parametrize("ttl", [1, 30])
async def test_the_store_ttl_is_the_time_left(ttl):
    clock = Clock()
    store = MemoryStateStore()
    seen: list[int] = []
    original = store.cache_set

    async def spy(key: str, value: bytes, ttl_ms: int) -> None:
        seen.append(ttl_ms)
        await original(key, value, ttl_ms)

    store.cache_set = spy  # type: ignore[method-assign]
    cache = ResponseCache(store, clock)
    entry = cache.entry(b"{}", "p", None, ttl)
    clock.now += 0.5
    await cache.put("k", entry)
    assert seen == [ttl * 1000 - 500]
