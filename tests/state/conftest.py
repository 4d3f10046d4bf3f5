"""The shared state-store suite: every test in this folder that takes ``store`` runs against memory, the embedded
SQLite store, the shared Redis (GATEWAY_TEST_REDIS_URL) and a private three-master Redis Cluster."""

from __future__ import annotations

import pytest

from gateway.state.memory import MemoryStateStore
from gateway.state.redis import RedisStateStore
from gateway.state.sqlite import SQLiteStateStore
from tests.support.redis_servers import RedisCluster, delete_prefix, random_prefix, test_redis_url

BACKENDS = ["memory", "embedded", "redis", "redis-cluster"]


@pytest.fixture(scope="session")
def redis_cluster():
    cluster = RedisCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path):
    kind = request.param
    if kind == "memory":
        store = MemoryStateStore()
    elif kind == "embedded":
        store = SQLiteStateStore(str(tmp_path / "state.db"), str(tmp_path / "cache.db"))
    else:
        url = test_redis_url() if kind == "redis" else request.getfixturevalue("redis_cluster").url
        store = RedisStateStore(url, key_prefix=random_prefix(), timeout_ms=5000)  # a busy test box is slow
    await store.start()
    if kind.startswith("redis"):
        assert store.healthy, f"{kind} at {store.url}: {store.last_error}"
    yield store
    if kind.startswith("redis"):
        await delete_prefix(store._client, store.prefix)
    await store.close()
