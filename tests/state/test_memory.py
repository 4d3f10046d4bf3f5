"""MemoryStateStore specifics: the bounded LRU cache space and the injectable clock."""

from __future__ import annotations

from gateway.state.base import BudgetItem
from gateway.state.memory import MemoryStateStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_cache_evicts_the_least_recently_used_beyond_its_entry_bound():
    store = MemoryStateStore(cache_max_entries=3)
    for key in ("a", "b", "c"):
        await store.cache_set(key, b"v", 60_000)
    assert await store.cache_get("a") == b"v"  # a is now the most recent
    await store.cache_set("d", b"v", 60_000)
    assert await store.cache_get("b") is None
    assert [await store.cache_get(k) for k in ("a", "c", "d")] == [b"v"] * 3


async def test_the_cache_evicts_by_bytes_and_skips_values_larger_than_the_bound():
    store = MemoryStateStore(cache_max_bytes=100)
    await store.cache_set("a", b"x" * 40, 60_000)
    await store.cache_set("b", b"x" * 40, 60_000)
    await store.cache_set("c", b"x" * 40, 60_000)
    assert await store.cache_get("a") is None
    assert await store.cache_get("b") is not None and await store.cache_get("c") is not None
    await store.cache_set("huge", b"x" * 101, 60_000)
    assert await store.cache_get("huge") is None
    assert await store.cache_get("c") is not None


async def test_ttls_follow_the_injected_clock():
    clock = Clock()
    store = MemoryStateStore(clock=clock)
    await store.set("k", b"v", ttl_ms=1000)
    await store.reserve("s", [BudgetItem("tpm", 10, 10, 60_000)], "r", 5000)
    clock.now += 0.999
    assert await store.get("k") == b"v"
    clock.now += 0.002
    assert await store.get("k") is None
    assert await store.usage("s", ["tpm"]) == [10]
    clock.now += 5
    assert await store.usage("s", ["tpm"]) == [0]
