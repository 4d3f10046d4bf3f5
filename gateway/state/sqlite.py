"""The embedded StateStore (the default, no server): SQLite files under the data directory, exact across the
worker processes of one machine.

``state.db`` holds counters, reservations, breakers, leases, records, logs and the KV space; ``cache.db`` holds
the response cache (a separate file, so cache writes never wait on the counters' write lock). Each worker runs
every SQLite call on its own thread (one for each file), never on the event loop; operations that read then
write take the write lock first (``BEGIN IMMEDIATE``), so concurrent reserves in several processes admit exactly
up to the limit. Lock waits are bounded by ``busy_timeout_ms``; a call that runs out raises
``StateStoreUnavailable``. A background task purges expired rows every few seconds and keeps ``healthy``.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from typing import Any, Callable, Sequence

from gateway.background import BackgroundTask
from gateway.observability.metrics import Metrics
from gateway.state import sqlite_cache
from gateway.state import sqlite_ops as ops
from gateway.state.base import (
    Admission,
    BudgetItem,
    Record,
    RecordVersions,
    SettleOutcome,
    StateStore,
    StateStoreError,
    StateStoreUnavailable,
    check_reserve,
    check_settle,
)

log = logging.getLogger("gateway.state")

PURGE_EVERY_S = 5.0


class _SqliteThread:
    """One thread owning one connection; ``call`` hands it a function and awaits the result.

    A plain queue and ``call_soon_threadsafe`` instead of an executor: about half the overhead per call.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.conn: sqlite3.Connection | None = None
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        return await future

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, fn, args = job
            try:
                result, error = fn(self.conn, *args), None
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, exc
            if loop is None:
                continue
            try:
                loop.call_soon_threadsafe(_resolve, future, result, error)
            except RuntimeError:  # the loop closed while the call ran: nobody is waiting
                pass

    def close(self) -> None:
        """Close the connection on its thread and stop the thread (blocking; call off the loop)."""
        if self._thread is None:
            return
        done = threading.Event()

        def shut(conn: sqlite3.Connection | None) -> None:
            if conn is not None:
                conn.close()
            done.set()

        self._jobs.put((None, None, shut, ()))
        self._jobs.put(None)
        self._thread.join(10)
        self._thread = None
        self.conn = None


def _resolve(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class SQLiteStateStore(StateStore):
    backend = "embedded"

    def __init__(self, path: str, cache_path: str, busy_timeout_ms: int = 500, cache_max_entries: int = 10_000,
                 cache_max_bytes: int = 256 * 1024 * 1024, clock: Callable[[], float] = time.time,
                 cache_touch_ms: int = 1000, metrics: Metrics | None = None) -> None:
        self.path = path
        #: where failed calls are counted (a private one when none is given)
        self.metrics = metrics if metrics is not None else Metrics()
        self.cache_path = cache_path
        self.busy_timeout_ms = busy_timeout_ms
        self.cache_max_entries = cache_max_entries
        self.cache_max_bytes = cache_max_bytes
        self.cache_touch_ms = cache_touch_ms
        self.clock = clock
        self.healthy = False
        self._state = _SqliteThread("gateway-state")
        self._cache = _SqliteThread("gateway-cache")
        self._space: sqlite_cache.CacheSpace | None = None
        self._housekeeper = BackgroundTask("gateway-state-purge")

    def _now(self) -> int:
        return int(self.clock() * 1000)

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        def open_state(_: None) -> None:
            conn = ops.connect(self.path, self.busy_timeout_ms)
            ops.create_schema(conn)
            self._state.conn = conn

        def open_cache(_: None) -> None:
            conn = ops.connect(self.cache_path, self.busy_timeout_ms)
            ops.create_schema(conn, sqlite_cache.SCHEMA)
            self._cache.conn = conn
            self._space = sqlite_cache.CacheSpace(conn, self.cache_max_entries, self.cache_max_bytes,
                                                  self.cache_touch_ms)

        await self._state.call(open_state)
        await self._cache.call(open_cache)
        self.healthy = True
        self._housekeeper = BackgroundTask("gateway-state-purge")  # a store opened again purges again
        self._housekeeper.start(self._housekeeping)

    async def close(self) -> None:
        await self._housekeeper.close()
        await asyncio.to_thread(self._state.close)
        await asyncio.to_thread(self._cache.close)

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(PURGE_EVERY_S)
            try:
                now = self._now()
                await self._state.call(ops.purge, now)
                await self._cache.call(self._space_purge, now)
                self.healthy = True
            except sqlite3.Error as exc:
                if self.healthy:
                    log.warning("embedded state store: housekeeping failed: %s", exc)
                self.healthy = False
                self.metrics.count_state_store_error(self.backend, "purge")

    async def _do(self, operation: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(conn, *args)`` on the state connection's thread, SQLite errors turned into state-store errors."""
        return await self._on(self._state, operation, fn, *args)

    async def _cached(self, operation: str, fn: Callable[..., Any], *args: Any) -> Any:
        """The same on the cache connection's thread (cache writes never queue behind counters)."""
        return await self._on(self._cache, operation, fn, *args)

    async def _on(self, thread: _SqliteThread, operation: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await thread.call(fn, *args)
        except sqlite3.OperationalError as exc:
            self.metrics.count_state_store_error(self.backend, operation)
            raise StateStoreUnavailable(f"embedded state store: {operation}: {exc}") from None
        except sqlite3.Error as exc:
            self.metrics.count_state_store_error(self.backend, operation)
            raise StateStoreError(f"embedded state store: {operation}: {exc}") from None

    # -- key-value -------------------------------------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        return await self._do("get", ops.kv_get, key, self._now())

    async def set(self, key: str, value: bytes, ttl_ms: int | None = None) -> None:
        expires = None if ttl_ms is None else self._now() + ttl_ms
        await self._do("set", ops.kv_set, key, value, expires)

    async def delete(self, key: str) -> None:
        await self._do("delete", ops.kv_delete, key)

    async def set_if_absent(self, key: str, value: bytes, ttl_ms: int | None = None) -> bool:
        now = self._now()
        return await self._do("set_if_absent", ops.kv_set_if_absent, key, value,
                              None if ttl_ms is None else now + ttl_ms, now)

    async def incr(self, key: str, amount: int = 1, ttl_ms: int | None = None) -> int:
        now = self._now()
        return await self._do("incr", ops.kv_incr, key, amount, None if ttl_ms is None else now + ttl_ms, now)

    # -- cache -----------------------------------------------------------------------------------------------

    async def cache_get(self, key: str) -> bytes | None:
        return await self._cached("cache_get", self._space_get, key, self._now())

    async def cache_set(self, key: str, value: bytes, ttl_ms: int) -> None:
        await self._cached("cache_set", self._space_set, key, value, ttl_ms, self._now())

    def _opened_space(self) -> sqlite_cache.CacheSpace:
        assert self._space is not None, "start() was not awaited"
        return self._space

    def _space_get(self, _: sqlite3.Connection, key: str, now: int) -> bytes | None:
        return self._opened_space().get(key, now)

    def _space_set(self, _: sqlite3.Connection, key: str, value: bytes, ttl_ms: int, now: int) -> None:
        self._opened_space().set(key, value, ttl_ms, now)

    def _space_purge(self, _: sqlite3.Connection, now: int) -> None:
        self._opened_space().purge(now)

    # -- leases ----------------------------------------------------------------------------------------------

    async def lease(self, key: str, holder: str, ttl_ms: int) -> bool:
        return await self._do("lease", ops.lease, key, holder, ttl_ms, self._now())

    async def release(self, key: str, holder: str) -> bool:
        return await self._do("release", ops.release, key, holder, self._now())

    # -- budgets ---------------------------------------------------------------------------------------------

    async def reserve(self, scope: str, items: Sequence[BudgetItem], reservation_id: str | None = None,
                      ttl_ms: int | None = None) -> Admission:
        check_reserve(items, reservation_id, ttl_ms)
        return await self._do("reserve", ops.reserve, scope, items, reservation_id, ttl_ms, self._now())

    async def settle(self, scope: str, reservation_id: str, items: Sequence[BudgetItem],
                     actual: Sequence[int]) -> SettleOutcome:
        check_settle(items, actual)
        return await self._do("settle", ops.settle, scope, reservation_id, items, actual, self._now())

    async def usage(self, scope: str, keys: Sequence[str]) -> list[int]:
        return await self._do("usage", ops.usage, scope, keys, self._now())

    # -- breakers --------------------------------------------------------------------------------------------

    async def breaker_open_until(self, key: str) -> int:
        return await self._do("breaker_open_until", ops.breaker_open_until, key)

    async def breaker_failure(self, key: str, threshold: int, window_ms: int, cooldown_ms: int,
                              now_ms: int) -> bool:
        return await self._do("breaker_failure", ops.breaker_failure, key, max(1, threshold), window_ms,
                              cooldown_ms, now_ms)

    async def breaker_success(self, key: str, now_ms: int) -> None:
        await self._do("breaker_success", ops.breaker_success, key, now_ms)

    # -- records ---------------------------------------------------------------------------------------------

    async def record_put(self, kind: str, id: str, workspace: str, doc: bytes) -> int:
        version: int = await self._do("record_put", ops.record_put, kind, id, workspace, doc)
        self._record_changed(kind, id)
        return version

    async def record_create(self, kind: str, id: str, workspace: str, doc: bytes) -> bool:
        created: bool = await self._do("record_create", ops.record_create, kind, id, workspace, doc)
        if created:
            self._record_changed(kind, id)
        return created

    async def record_put_if(self, kind: str, id: str, workspace: str, doc: bytes, expected: bytes) -> bool:
        stored: bool = await self._do("record_put_if", ops.record_put_if, kind, id, workspace, doc, expected)
        if stored:
            self._record_changed(kind, id)
        return stored

    async def record_get(self, kind: str, id: str) -> Record | None:
        return await self._do("record_get", ops.record_get, kind, id)

    async def record_delete(self, kind: str, id: str) -> bool:
        deleted: bool = await self._do("record_delete", ops.record_delete, kind, id)
        if deleted:
            self._record_changed(kind, id)
        return deleted

    async def record_delete_if(self, kind: str, id: str, expected: bytes) -> bool:
        deleted: bool = await self._do("record_delete_if", ops.record_delete_if, kind, id, expected)
        if deleted:
            self._record_changed(kind, id)
        return deleted

    async def record_list(self, kind: str, workspace: str | None = None) -> list[Record]:
        return await self._do("record_list", ops.record_list, kind, workspace)

    async def records_version(self) -> int:
        return await self._do("records_version", ops.records_version)

    async def record_versions(self, kinds: Sequence[str], since: Sequence[int] = ()) -> RecordVersions:
        return await self._do("record_versions", ops.record_versions, kinds, since)

    # -- logs ------------------------------------------------------------------------------------------------

    async def log_append(self, name: str, item: bytes, max_len: int) -> int:
        return await self._do("log_append", ops.log_append, name, item, max_len)

    async def log_read(self, name: str, after_seq: int, limit: int) -> list[tuple[int, bytes]]:
        return await self._do("log_read", ops.log_read, name, after_seq, limit)
