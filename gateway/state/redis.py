"""The Redis StateStore: several gateway instances share limits, breakers, cache and records through one Redis
or Redis Cluster (redis-py asyncio; hiredis parses replies when installed, as the core dependencies ensure).

- URLs: ``redis://[user:pass@]host:port/db`` and ``rediss://`` (TLS), or a cluster as
  ``redis+cluster://[user:pass@]host:port[,host:port...]`` (``rediss+cluster://`` for TLS): any reachable node
  is enough, the client discovers the rest and follows slot moves.
- Every atomic operation is one Lua script (``redis_scripts``), loaded once and run by EVALSHA; all keys one
  script touches share a hash tag, so they live in one cluster slot. Keys start with ``key_prefix`` (tests use a
  random one per run; nothing here ever flushes a database).
- Every call is bounded by ``timeout_ms`` (connect, read, and waiting for a pooled connection). No command is
  retried by the client library (a retried increment could count twice); operations that are safe to repeat
  (reads, plain writes, and reserve/settle with an id, which are idempotent by id) are retried once on a fresh
  connection after a connection error, which covers connections a Redis restart left dead.
- A background probe PINGs every ``probe_interval_ms`` and keeps ``healthy``; a connection error marks the store
  unhealthy and wakes the probe at once. While unhealthy, calls fail fast with ``StateStoreUnavailable`` instead
  of waiting for timeouts; reconnection is automatic when the server answers again.
- A task cancelled while a call is in flight gets its ``CancelledError`` when the call returns, even where
  redis-py's own ``asyncio.wait_for`` swallowed it (Python 3.11, CPython gh-86296): a worker that stops its
  background loops, or a request whose client left, never carries on as if nothing happened.
- The cache space is plain ``SET key value PX ttl`` / ``GET``: Redis evicts by its own ``maxmemory-policy``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NoReturn, Sequence

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ClusterError, RedisClusterException, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.background import BackgroundTask
from gateway.observability.metrics import Metrics
from gateway.redis_url import is_cluster_url, parse_cluster_url
from gateway.state import redis_scripts as lua
from gateway.state.base import (
    ADMITTED,
    RECORD_CHANGE_LOG,
    SETTLED_KEEP_MS,
    Admission,
    BudgetItem,
    Record,
    RecordVersions,
    SettleOutcome,
    StateStore,
    StateStoreError,
    StateStoreUnavailable,
    admitted,
    check_reserve,
    check_settle,
    logged_changes,
)
from gateway.waiting import wait_event

log = logging.getLogger("gateway.state")


def _honour_cancel(task: asyncio.Task | None, asked: int) -> None:
    """Raise the cancel a redis-py call swallowed: redis-py writes through ``asyncio.wait_for``, which on Python
    3.11 drops a cancel that lands as the write completes (CPython gh-86296), so a cancelled caller would carry on."""
    if task is not None and task.cancelling() > asked:
        raise asyncio.CancelledError


def _record_value(workspace: str, doc: bytes) -> bytes:
    ws = workspace.encode()
    return str(len(ws)).encode() + b":" + ws + doc


def _change_entry(entry: bytes) -> tuple[int, str]:
    """A change log entry, ``<change number>:<id>``."""
    number, _, id = entry.decode().partition(":")
    return int(number), id


def _record_parts(value: bytes) -> tuple[str, bytes]:
    n, _, rest = value.partition(b":")
    size = int(n)
    return rest[:size].decode(), rest[size:]


class RedisStateStore(StateStore):
    def __init__(self, url: str, key_prefix: str = "gw:", timeout_ms: int = 500, max_connections: int = 64,
                 probe_interval_ms: int = 1000, metrics: Metrics | None = None) -> None:
        if "{" in key_prefix or "}" in key_prefix:
            raise ValueError("the Redis key prefix may not contain braces (they pick cluster slots)")
        self.url = url
        self.cluster = is_cluster_url(url)
        self.backend = "redis-cluster" if self.cluster else "redis"
        self.prefix = key_prefix
        self.timeout_s = timeout_ms / 1000
        self.max_connections = max_connections
        self.probe_interval_s = probe_interval_ms / 1000
        #: where failed calls are counted (a private one when none is given)
        self.metrics = metrics if metrics is not None else Metrics()
        self.healthy = False
        self.last_error = ""
        self._client: Any = None
        self._scripts: dict[str, Any] = {}
        self._prober = BackgroundTask("gateway-redis-probe")
        self._wake = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _make_client(self) -> Any:
        common: dict[str, Any] = {"socket_timeout": self.timeout_s, "socket_connect_timeout": self.timeout_s,
                  "retry": Retry(NoBackoff(), 0)}
        if self.cluster:
            nodes, username, password, tls = parse_cluster_url(self.url)
            return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in nodes], username=username,
                                password=password, ssl=tls, max_connections=self.max_connections, **common)
        pool = aioredis.BlockingConnectionPool.from_url(
            self.url, max_connections=self.max_connections, timeout=self.timeout_s, **common)
        return aioredis.Redis(connection_pool=pool)

    async def start(self) -> None:
        self._client = self._make_client()
        self._scripts = {name: self._client.register_script(getattr(lua, name)) for name in (
            "RESERVE", "SETTLE", "USAGE", "INCR", "LEASE", "RELEASE", "BREAKER_FAILURE", "BREAKER_SUCCESS",
            "RECORD_PUT", "RECORD_CREATE", "RECORD_PUT_IF", "RECORD_DELETE", "RECORD_LIST_WORKSPACE", "RECORD_VERSIONS",
            "LOG_APPEND", "LOG_READ")}
        await self._probe_once()
        if not self.healthy:
            log.warning("redis state store unreachable at start (%s); requests go on, reconnecting",
                        self.last_error)
        self._prober = BackgroundTask("gateway-redis-probe")  # a store opened again probes again
        self._prober.start(self._probe_loop)

    async def close(self) -> None:
        await self._prober.close()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _probe_once(self) -> None:
        try:
            try:
                await self._client.ping()
            except RedisConnectionError:  # a connection the server dropped: one more try on a fresh one
                await self._client.ping()
        except Exception as exc:  # noqa: BLE001 - any failure to answer means unreachable (cluster errors too)
            if self.healthy:
                log.warning("redis state store unreachable: %s", exc)
                self.metrics.count_state_store_error(self.backend, "probe")
            self.healthy = False
            self.last_error = str(exc) or exc.__class__.__name__
            return
        if not self.healthy and self.last_error:
            log.warning("redis state store reachable again")
        self.healthy = True

    async def _probe_loop(self) -> None:
        task = asyncio.current_task()
        while True:
            await wait_event(self._wake, self.probe_interval_s)
            self._wake.clear()
            await self._probe_once()
            _honour_cancel(task, 0)

    async def _call(self, operation: str, fn: Any, *args: Any, retry_safe: bool = False) -> Any:
        """Run one client call with the store's failure rules (fail fast, one safe retry, metrics)."""
        if not self.healthy:
            self.metrics.count_state_store_error(self.backend, operation)
            raise StateStoreUnavailable(f"redis state store unavailable: {self.last_error}")
        attempts = 2 if retry_safe else 1
        task = asyncio.current_task()
        asked = task.cancelling() if task is not None else 0
        for attempt in range(attempts):
            try:
                result = await fn(*args)
            except RedisConnectionError as exc:
                if attempt + 1 < attempts:
                    continue
                self._down(operation, exc)
            except (TimeoutError, RedisTimeoutError, OSError, ClusterError, RedisClusterException) as exc:
                self._down(operation, exc)
            except RedisError as exc:
                self.metrics.count_state_store_error(self.backend, operation)
                raise StateStoreError(f"redis state store: {operation}: {exc}") from None
            _honour_cancel(task, asked)
            return result

    def _down(self, operation: str, exc: BaseException) -> NoReturn:
        self.metrics.count_state_store_error(self.backend, operation)
        self.healthy = False
        self.last_error = str(exc) or exc.__class__.__name__
        self._wake.set()
        raise StateStoreUnavailable(f"redis state store: {operation}: {self.last_error}") from None

    def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._scripts[name](keys=keys, args=args)

    async def _run(self, operation: str, name: str, keys: list[str], args: list[Any],
                   retry_safe: bool = False) -> Any:
        return await self._call(operation, self._script, name, keys, args, retry_safe=retry_safe)

    # -- key names -------------------------------------------------------------------------------------------

    def _budget_base(self, scope: str) -> str:
        return f"{self.prefix}b:{{{scope or '_'}}}:"

    # -- key-value -------------------------------------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        return await self._call("get", self._client.get, self.prefix + "kv:" + key, retry_safe=True)

    async def set(self, key: str, value: bytes, ttl_ms: int | None = None) -> None:
        await self._call("set", self._set, self.prefix + "kv:" + key, value, ttl_ms, retry_safe=True)

    async def _set(self, key: str, value: bytes, ttl_ms: int | None, nx: bool = False) -> Any:
        return await self._client.set(key, value, px=ttl_ms if ttl_ms else None, nx=nx)

    async def delete(self, key: str) -> None:
        await self._call("delete", self._client.delete, self.prefix + "kv:" + key, retry_safe=True)

    async def set_if_absent(self, key: str, value: bytes, ttl_ms: int | None = None) -> bool:
        return bool(await self._call("set_if_absent", self._set, self.prefix + "kv:" + key, value, ttl_ms, True))

    async def incr(self, key: str, amount: int = 1, ttl_ms: int | None = None) -> int:
        return int(await self._run("incr", "INCR", [self.prefix + "kv:" + key],
                                   [amount, "" if ttl_ms is None else ttl_ms]))

    # -- cache -----------------------------------------------------------------------------------------------

    async def cache_get(self, key: str) -> bytes | None:
        return await self._call("cache_get", self._client.get, self.prefix + "c:" + key, retry_safe=True)

    async def cache_set(self, key: str, value: bytes, ttl_ms: int) -> None:
        if ttl_ms > 0:
            await self._call("cache_set", self._set, self.prefix + "c:" + key, value, ttl_ms, retry_safe=True)

    # -- leases ----------------------------------------------------------------------------------------------

    async def lease(self, key: str, holder: str, ttl_ms: int) -> bool:
        return bool(await self._run("lease", "LEASE", [self.prefix + "l:" + key], [holder, ttl_ms],
                                    retry_safe=True))

    async def release(self, key: str, holder: str) -> bool:
        return bool(await self._run("release", "RELEASE", [self.prefix + "l:" + key], [holder], retry_safe=True))

    # -- budgets ---------------------------------------------------------------------------------------------

    async def reserve(self, scope: str, items: Sequence[BudgetItem], reservation_id: str | None = None,
                      ttl_ms: int | None = None) -> Admission:
        check_reserve(items, reservation_id, ttl_ms)
        base = self._budget_base(scope)
        keys = [base + "r", base + "rd", base + "s:" + (reservation_id or "")]
        args: list[Any] = [base, reservation_id or "", ttl_ms or 0]
        for item in items:
            keys.append(base + "c:" + item.key)
            args += (item.key, item.limit, item.amount, max(1, item.key_ttl_ms), 1 if item.cut else 0)
        answer = await self._run("reserve", "RESERVE", keys, args, retry_safe=reservation_id is not None)
        if answer[0] == 1:
            return ADMITTED if len(answer) == 1 else admitted(items, [int(a) for a in answer[1:]])
        index = int(answer[1])
        return Admission(False, index, items[index].key, int(answer[2]), items[index].limit)

    async def settle(self, scope: str, reservation_id: str, items: Sequence[BudgetItem],
                     actual: Sequence[int]) -> SettleOutcome:
        check_settle(items, actual)
        base = self._budget_base(scope)
        keys = [base + "r", base + "rd", base + "s:" + reservation_id] + [base + "c:" + i.key for i in items]
        answer = await self._run("settle", "SETTLE", keys, [base, reservation_id, SETTLED_KEEP_MS, *actual],
                                 retry_safe=True)
        return answer.decode()

    async def usage(self, scope: str, keys: Sequence[str]) -> list[int]:
        base = self._budget_base(scope)
        answer = await self._run("usage", "USAGE", [base + "r", base + "rd", *(base + "c:" + k for k in keys)],
                                 [base], retry_safe=True)
        return [int(v) for v in answer]

    # -- breakers --------------------------------------------------------------------------------------------

    async def breaker_open_until(self, key: str) -> int:
        raw = await self._call("breaker_open_until", self._client.hget, self.prefix + "cb:" + key, "u",
                               retry_safe=True)
        return int(raw) if raw else 0

    async def breaker_failure(self, key: str, threshold: int, window_ms: int, cooldown_ms: int,
                              now_ms: int) -> bool:
        return bool(await self._run("breaker_failure", "BREAKER_FAILURE", [self.prefix + "cb:" + key],
                                    [max(1, threshold), window_ms, cooldown_ms, now_ms]))

    async def breaker_success(self, key: str, now_ms: int) -> None:
        await self._run("breaker_success", "BREAKER_SUCCESS", [self.prefix + "cb:" + key], [now_ms],
                        retry_safe=True)

    # -- records ---------------------------------------------------------------------------------------------

    def _record_keys(self, kind: str) -> tuple[str, str, str]:
        base = f"{self.prefix}{{rec}}:"
        return base + "d:" + kind, base + "v", base + "w:" + kind + ":"

    def _version_keys(self, kind: str) -> list[str]:
        """The total counter, the kind's own, the count of changes counted per kind and the kind's change log (one
        slot: ``{rec}``)."""
        base = f"{self.prefix}{{rec}}:"
        return [base + "v", base + "vk:" + kind, base + "vk", base + "vl:" + kind]

    async def record_put(self, kind: str, id: str, workspace: str, doc: bytes) -> int:
        docs, _, ws_prefix = self._record_keys(kind)
        version = int(await self._run("record_put", "RECORD_PUT", [docs, *self._version_keys(kind)],
                                      [ws_prefix, id, workspace, _record_value(workspace, doc), RECORD_CHANGE_LOG],
                                      retry_safe=True))
        self._record_changed(kind, id)
        return version

    async def record_create(self, kind: str, id: str, workspace: str, doc: bytes) -> bool:
        docs, _, ws_prefix = self._record_keys(kind)
        created = bool(await self._run(
            "record_create", "RECORD_CREATE", [docs, *self._version_keys(kind)],
            [ws_prefix, id, workspace, _record_value(workspace, doc), RECORD_CHANGE_LOG],
            retry_safe=True))  # a retry finds its own value stored: True, as the lost first reply was
        if created:
            self._record_changed(kind, id)
        return created

    async def record_put_if(self, kind: str, id: str, workspace: str, doc: bytes, expected: bytes) -> bool:
        docs, _, ws_prefix = self._record_keys(kind)
        stored = bool(await self._run(
            "record_put_if", "RECORD_PUT_IF", [docs, *self._version_keys(kind)],
            [ws_prefix, id, workspace, _record_value(workspace, doc), RECORD_CHANGE_LOG, expected],
            retry_safe=True))  # a retry finds the new value stored: True, as the lost first reply was
        if stored:
            self._record_changed(kind, id)
        return stored

    async def record_get(self, kind: str, id: str) -> Record | None:
        value = await self._call("record_get", self._client.hget, self._record_keys(kind)[0], id, retry_safe=True)
        if value is None:
            return None
        workspace, doc = _record_parts(value)
        return Record(kind, id, workspace, doc)

    async def record_delete(self, kind: str, id: str) -> bool:
        docs, _, ws_prefix = self._record_keys(kind)
        deleted = bool(await self._run("record_delete", "RECORD_DELETE", [docs, *self._version_keys(kind)],
                                       [ws_prefix, id, RECORD_CHANGE_LOG]))
        if deleted:
            self._record_changed(kind, id)
        return deleted

    async def record_delete_if(self, kind: str, id: str, expected: bytes) -> bool:
        docs, _, ws_prefix = self._record_keys(kind)
        deleted = bool(await self._run("record_delete_if", "RECORD_DELETE", [docs, *self._version_keys(kind)],
                                       [ws_prefix, id, RECORD_CHANGE_LOG, expected]))
        if deleted:
            self._record_changed(kind, id)
        return deleted

    async def record_list(self, kind: str, workspace: str | None = None) -> list[Record]:
        docs, _, ws_prefix = self._record_keys(kind)
        if workspace is None:
            found = await self._call("record_list", self._client.hgetall, docs, retry_safe=True)
            pairs = list(found.items())
        else:
            flat = await self._run("record_list", "RECORD_LIST_WORKSPACE", [docs, ws_prefix + workspace], [],
                                   retry_safe=True)
            pairs = list(zip(flat[::2], flat[1::2]))
        out = [Record(kind, rid.decode(), *_record_parts(value)) for rid, value in pairs]
        out.sort(key=lambda r: r.id)
        return out

    async def records_version(self) -> int:
        raw = await self._call("records_version", self._client.get, self._record_keys("")[1], retry_safe=True)
        return int(raw) if raw else 0

    async def record_versions(self, kinds: Sequence[str], since: Sequence[int] = ()) -> RecordVersions:
        total, _, kinded, _ = self._version_keys("")
        keys = [total, kinded]
        for kind in kinds:
            keys += self._version_keys(kind)[1::2]
        after = [since[i] if i < len(since) else -1 for i in range(len(kinds))]
        raw = await self._run("record_versions", "RECORD_VERSIONS", keys, after, retry_safe=True)
        counts = tuple(int(c) for c in raw[2::2])
        changed = tuple(logged_changes(count, n, map(_change_entry, entries))
                        for count, n, entries in zip(counts, since, raw[3::2]))
        return RecordVersions(counts, int(raw[0]), int(raw[0]) - int(raw[1]), changed)

    # -- logs ------------------------------------------------------------------------------------------------

    def _log_keys(self, name: str) -> list[str]:
        base = f"{self.prefix}log:{{{name or '_'}}}:"
        return [base + "seq", base + "items"]

    async def log_append(self, name: str, item: bytes, max_len: int) -> int:
        return int(await self._run("log_append", "LOG_APPEND", self._log_keys(name), [item, max(1, max_len)]))

    async def log_read(self, name: str, after_seq: int, limit: int) -> list[tuple[int, bytes]]:
        answer = await self._run("log_read", "LOG_READ", self._log_keys(name), [after_seq, limit],
                                 retry_safe=True)
        if not answer:
            return []
        start = int(answer[0])
        return [(start + i, item) for i, item in enumerate(answer[1:])]
