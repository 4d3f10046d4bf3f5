"""The per-worker record cache: misses name what to load, concurrent misses share one read, answers (absence
included) stay until invalidated, and a load racing an invalidation is not kept."""

from __future__ import annotations

import asyncio

import pytest

from gateway.controlplane import providers
from gateway.controlplane.directory import SLUG, RecordCache, RecordsNeeded
from gateway.controlplane.secrets import SecretBox
from gateway.state.memory import MemoryStateStore

BOX = SecretBox.from_text("k")


class CountingStore(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.gate: asyncio.Event | None = None

    async def record_get(self, kind, id):
        self.gets += 1
        if self.gate is not None:
            await self.gate.wait()
        return await super().record_get(kind, id)


@pytest.fixture
async def cache():
    store = CountingStore()
    cache = RecordCache(store, lambda: BOX)
    await cache.slugs.create(providers.build(BOX, "ws", "s", {"provider": "vendorA", "api_key": "sk"}))
    store.gets = 0
    return cache


async def test_a_miss_names_the_record_and_a_fetch_answers_it(cache):
    with pytest.raises(RecordsNeeded) as needed:
        cache.slug("ws", "s")
    assert needed.value.wants == [(SLUG, "ws", "s")]
    await cache.fetch(needed.value)
    assert cache.slug("ws", "s").api_key == "sk"


async def test_absence_is_cached_until_invalidated(cache):
    await cache.fetch(RecordsNeeded([(SLUG, "ws", "missing")]))
    assert cache.slug("ws", "missing") is None
    gets = cache.store.gets
    assert cache.slug("ws", "missing") is None and cache.store.gets == gets
    cache.invalidate()
    with pytest.raises(RecordsNeeded):
        cache.slug("ws", "missing")


async def test_concurrent_misses_share_one_read(cache):
    cache.store.gate = asyncio.Event()
    needed = RecordsNeeded([(SLUG, "ws", "s")])
    waiters = [asyncio.ensure_future(cache.fetch(needed)) for _ in range(5)]
    await asyncio.sleep(0.01)
    cache.store.gate.set()
    await asyncio.gather(*waiters)
    assert cache.store.gets == 1


async def test_a_load_that_raced_an_invalidation_is_not_kept(cache):
    cache.store.gate = asyncio.Event()
    loading = asyncio.ensure_future(cache.fetch(RecordsNeeded([(SLUG, "ws", "s")])))
    await asyncio.sleep(0.01)
    cache.invalidate()
    cache.store.gate.set()
    await loading
    assert not cache.has(SLUG, "ws", "s")
