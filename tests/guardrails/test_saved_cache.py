"""Saved guardrails as requests read them: one store read per id until a record changes, the workspace checked,
unknown ids remembered, and a read overtaken by a change not kept."""

from __future__ import annotations

import asyncio

from gateway.controlplane.secrets import SecretBox
from gateway.guardrails.saved import new_guardrail, parse_create
from gateway.guardrails.saved_cache import SavedGuardrailCache, guardrail_repository
from gateway.state.memory import MemoryStateStore


def box() -> SecretBox:
    return SecretBox.from_text("test-secret-key")


BODY = {"name": "g", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 3}}]}


class CountingStore(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def record_get(self, kind: str, id: str):
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return await super().record_get(kind, id)


async def test_records_are_read_once_until_invalidated():
    store = CountingStore()
    cache = SavedGuardrailCache(guardrail_repository(store), box)
    record = await cache.repository.create(new_guardrail(parse_create(BODY), "ws1"))
    assert (await cache.resolve(record.id, "ws1")).name == "g"
    assert (await cache.resolve(record.id, "ws1")).name == "g"
    assert await cache.resolve("gr_missing", "ws1") is None
    assert await cache.resolve("gr_missing", "ws1") is None
    assert store.reads == 2
    assert await cache.resolve(record.id, "ws2") is None  # another workspace's id is unknown here
    await cache.repository.replace(new_guardrail(parse_create({**BODY, "name": "h"}), "ws1", guardrail_id=record.id,
                                                 created_at=record.created_at))
    assert (await cache.resolve(record.id, "ws1")).name == "g"  # still cached
    cache.invalidate()
    assert (await cache.resolve(record.id, "ws1")).name == "h"


async def test_a_read_overtaken_by_a_change_is_not_kept():
    store = CountingStore()
    cache = SavedGuardrailCache(guardrail_repository(store), box)
    record = await cache.repository.create(new_guardrail(parse_create(BODY), "ws1"))
    store.gate = asyncio.Event()
    pending = asyncio.create_task(cache.resolve(record.id, "ws1"))
    await asyncio.sleep(0)
    cache.invalidate()
    store.gate.set()
    await pending
    reads = store.reads
    await cache.resolve(record.id, "ws1")
    assert store.reads == reads + 1
