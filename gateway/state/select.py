"""Pick and build the process's StateStore from the settings: Redis when GATEWAY_REDIS_URL is set, else the
embedded SQLite store under GATEWAY_DATA_DIR."""

from __future__ import annotations

from gateway.observability.metrics import Metrics
from gateway.settings import Settings, data_path
from gateway.state.base import StateStore


def open_store(settings: Settings, metrics: Metrics | None = None) -> StateStore:
    if settings.redis_url:
        from gateway.state.redis import RedisStateStore

        return RedisStateStore(settings.redis_url, key_prefix=settings.redis_key_prefix,
                               timeout_ms=settings.state_timeout_ms, max_connections=settings.redis_max_connections,
                               probe_interval_ms=settings.state_probe_interval_ms, metrics=metrics)
    from gateway.state.sqlite import SQLiteStateStore

    return SQLiteStateStore(str(data_path(settings, "state.db")), str(data_path(settings, "cache.db")),
                            busy_timeout_ms=settings.state_timeout_ms,
                            cache_max_entries=settings.state_cache_max_entries,
                            cache_max_bytes=settings.state_cache_max_bytes, metrics=metrics)
