"""State stores for the jobs tests: the in-process memory store, the embedded SQLite store and the shared Redis."""

from __future__ import annotations

import pytest

from gateway.state.memory import MemoryStateStore
from gateway.state.redis import RedisStateStore
from gateway.state.sqlite import SQLiteStateStore
from tests.support.redis_servers import delete_prefix, random_prefix, test_redis_url


@pytest.fixture(params=["memory", "embedded", "redis"])
async def store(request, tmp_path):
    async for store in opened_store(request.param, tmp_path):
        yield store


async def opened_store(kind: str, tmp_path):
    """A started store of ``kind``, closed (and its Redis keys removed) after use."""
    if kind == "memory":
        store = MemoryStateStore()
    elif kind == "embedded":
        store = SQLiteStateStore(str(tmp_path / "state.db"), str(tmp_path / "cache.db"))
    else:
        store = RedisStateStore(test_redis_url(), key_prefix=random_prefix(), timeout_ms=5000)
    await store.start()
    yield store
    if kind == "redis":
        await delete_prefix(store._client, store.prefix)
    await store.close()
