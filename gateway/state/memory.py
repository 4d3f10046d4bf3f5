"""In-process StateStore: dicts with expiry times, for one process (tests and single-process use).

Every method runs to completion without awaiting, so each call is atomic on the event loop. Time for TTLs comes
from ``clock`` (seconds; injectable); breaker calls use the caller's ``now_ms``.
"""

from __future__ import annotations

import heapq
import time
from collections import OrderedDict, deque
from typing import Any, Callable, Sequence

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
    admitted,
    check_reserve,
    check_settle,
    logged_changes,
    reserved_amount,
)


class _Expiring:
    """A dict whose entries may expire, bounded by ``max_keys`` (expired entries go first, then the oldest)."""

    def __init__(self, clock: Callable[[], float], max_keys: int) -> None:
        self.clock = clock
        self.max_keys = max_keys
        self.data: dict[object, list] = {}  # key -> [expires_s | None, value]

    def entry(self, key: object) -> list | None:
        item = self.data.get(key)
        if item is not None and item[0] is not None and item[0] <= self.clock():
            del self.data[key]
            return None
        return item

    def get(self, key: object) -> Any:
        item = self.entry(key)
        return None if item is None else item[1]

    def put(self, key: object, value: Any, ttl_ms: int | None) -> None:
        if key not in self.data:
            self._make_room()
        self.data[key] = [None if ttl_ms is None else self.clock() + ttl_ms / 1000, value]

    def pop(self, key: object) -> None:
        self.data.pop(key, None)

    def _make_room(self) -> None:
        if len(self.data) < self.max_keys:
            return
        now = self.clock()
        for key in [k for k, (e, _) in self.data.items() if e is not None and e <= now]:
            del self.data[key]
        while len(self.data) >= self.max_keys:
            del self.data[next(iter(self.data))]


class _LruCache:
    """The cache space: LRU order in an OrderedDict, bounded by entries and bytes."""

    def __init__(self, clock: Callable[[], float], max_entries: int, max_bytes: int) -> None:
        self.clock = clock
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.data: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    def get(self, key: str) -> bytes | None:
        item = self.data.get(key)
        if item is None:
            return None
        if item[0] <= self.clock():
            self._drop(key)
            return None
        self.data.move_to_end(key)
        return item[1]

    def set(self, key: str, value: bytes, ttl_ms: int) -> None:
        if key in self.data:
            self._drop(key)
        if len(value) > self.max_bytes or ttl_ms <= 0:
            return
        self.data[key] = (self.clock() + ttl_ms / 1000, value)
        self.bytes += len(value)
        while len(self.data) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(next(iter(self.data)))

    def _drop(self, key: str) -> None:
        self.bytes -= len(self.data.pop(key)[1])


class _Breaker:
    __slots__ = ("open_until", "fails", "expires_ms")

    def __init__(self) -> None:
        self.open_until = 0
        self.fails: deque[int] = deque()
        self.expires_ms = 0


class MemoryStateStore(StateStore):
    backend = "memory"

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000,
                 cache_max_entries: int = 10_000, cache_max_bytes: int = 256 * 1024 * 1024) -> None:
        self.clock = clock
        self._kv = _Expiring(clock, max_keys)
        self._counters = _Expiring(clock, max_keys)  # (scope, key) -> int
        self._leases = _Expiring(clock, max_keys)  # key -> holder
        self._settled = _Expiring(clock, max_keys)  # (scope, id) -> True
        self._reservations: dict[tuple[str, str], list[tuple[str, int]]] = {}
        self._expiries: list[tuple[float, str, str]] = []  # heap of (expires_s, scope, id)
        self._cache = _LruCache(clock, cache_max_entries, cache_max_bytes)
        self._breakers: dict[str, _Breaker] = {}
        self._records: dict[str, dict[str, Record]] = {}
        self._version = 0
        self._kind_versions: dict[str, int] = {}
        #: per kind, its newest changes as (change number, id)
        self._change_logs: dict[str, deque[tuple[int, str]]] = {}
        self._logs: dict[str, tuple[list[int], deque[bytes]]] = {}  # name -> ([last_seq], items)

    # -- key-value -------------------------------------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        value = self._kv.get(key)
        return str(value).encode() if isinstance(value, int) else value

    async def set(self, key: str, value: bytes, ttl_ms: int | None = None) -> None:
        self._kv.put(key, value, ttl_ms)

    async def delete(self, key: str) -> None:
        self._kv.pop(key)

    async def set_if_absent(self, key: str, value: bytes, ttl_ms: int | None = None) -> bool:
        if self._kv.entry(key) is not None:
            return False
        self._kv.put(key, value, ttl_ms)
        return True

    async def incr(self, key: str, amount: int = 1, ttl_ms: int | None = None) -> int:
        item = self._kv.entry(key)
        if item is None:
            self._kv.put(key, amount, ttl_ms)
            return amount
        item[1] = int(item[1]) + amount
        return item[1]

    # -- cache -----------------------------------------------------------------------------------------------

    async def cache_get(self, key: str) -> bytes | None:
        return self._cache.get(key)

    async def cache_set(self, key: str, value: bytes, ttl_ms: int) -> None:
        self._cache.set(key, value, ttl_ms)

    # -- leases ----------------------------------------------------------------------------------------------

    async def lease(self, key: str, holder: str, ttl_ms: int) -> bool:
        current = self._leases.get(key)
        if current is not None and current != holder:
            return False
        self._leases.put(key, holder, ttl_ms)
        return True

    async def release(self, key: str, holder: str) -> bool:
        if self._leases.get(key) != holder:
            return False
        self._leases.pop(key)
        return True

    # -- budgets ---------------------------------------------------------------------------------------------

    def _sweep(self) -> None:
        """Release every reservation whose time ran out."""
        now = self.clock()
        heap = self._expiries
        while heap and heap[0][0] <= now:
            _, scope, rid = heapq.heappop(heap)
            for key, amount in self._reservations.pop((scope, rid), ()):
                self._add(scope, key, -amount)

    def _add(self, scope: str, key: str, delta: int) -> None:
        """Add to a counter that still exists (never below zero)."""
        item = self._counters.entry((scope, key))
        if item is not None:
            item[1] = max(0, item[1] + delta)

    async def reserve(self, scope: str, items: Sequence[BudgetItem], reservation_id: str | None = None,
                      ttl_ms: int | None = None) -> Admission:
        check_reserve(items, reservation_id, ttl_ms)
        self._sweep()
        if reservation_id is not None and (
            (scope, reservation_id) in self._reservations or self._settled.get((scope, reservation_id))
        ):
            return ADMITTED
        counters = self._counters
        amounts: list[int] = []
        for index, item in enumerate(items):
            used = counters.get((scope, item.key)) or 0
            amount = reserved_amount(item, used)
            if amount < 0:
                return Admission(False, index, item.key, used, item.limit)
            amounts.append(amount)
        for item, amount in zip(items, amounts):
            entry = counters.entry((scope, item.key))
            if entry is None:
                counters.put((scope, item.key), amount, item.key_ttl_ms)
            else:
                entry[1] += amount
        if reservation_id is not None:
            assert ttl_ms is not None  # check_reserve: a reservation id comes with its ttl
            self._reservations[(scope, reservation_id)] = [(item.key, a) for item, a in zip(items, amounts)]
            heapq.heappush(self._expiries, (self.clock() + ttl_ms / 1000, scope, reservation_id))
        return admitted(items, amounts)

    async def settle(self, scope: str, reservation_id: str, items: Sequence[BudgetItem],
                     actual: Sequence[int]) -> SettleOutcome:
        check_settle(items, actual)
        self._sweep()
        if self._settled.get((scope, reservation_id)):
            return "duplicate"
        self._settled.put((scope, reservation_id), True, SETTLED_KEEP_MS)
        reserved = self._reservations.pop((scope, reservation_id), None)
        if reserved is None:
            for item, amount in zip(items, actual):
                self._add(scope, item.key, amount)
            return "late"
        for (key, amount), real in zip(reserved, actual):
            self._add(scope, key, real - amount)
        return "settled"

    async def usage(self, scope: str, keys: Sequence[str]) -> list[int]:
        self._sweep()
        return [self._counters.get((scope, key)) or 0 for key in keys]

    # -- breakers --------------------------------------------------------------------------------------------

    def _breaker(self, key: str, now_ms: int | None = None) -> _Breaker | None:
        state = self._breakers.get(key)
        if state is not None and now_ms is not None and state.expires_ms <= now_ms:
            del self._breakers[key]
            return None
        return state

    async def breaker_open_until(self, key: str) -> int:
        state = self._breakers.get(key)
        return state.open_until if state is not None else 0

    async def breaker_failure(self, key: str, threshold: int, window_ms: int, cooldown_ms: int,
                              now_ms: int) -> bool:
        state = self._breaker(key, now_ms)
        if state is None:
            state = self._breakers[key] = _Breaker()
        state.expires_ms = now_ms + 2 * cooldown_ms + window_ms
        if state.open_until > now_ms:
            return False
        fails = state.fails
        fails.append(now_ms)
        while fails and (fails[0] <= now_ms - window_ms or len(fails) > threshold):
            fails.popleft()
        if state.open_until or len(fails) >= threshold:
            state.open_until = now_ms + cooldown_ms
            fails.clear()
            return True
        return False

    async def breaker_success(self, key: str, now_ms: int) -> None:
        state = self._breaker(key, now_ms)
        if state is not None and state.open_until and state.open_until <= now_ms:
            del self._breakers[key]

    # -- records ---------------------------------------------------------------------------------------------

    async def record_put(self, kind: str, id: str, workspace: str, doc: bytes) -> int:
        self._records.setdefault(kind, {})[id] = Record(kind, id, workspace, doc)
        self._bump(kind, id)
        return self._version

    async def record_create(self, kind: str, id: str, workspace: str, doc: bytes) -> bool:
        records = self._records.setdefault(kind, {})
        old = records.get(id)
        if old is not None:
            return old.doc == doc
        records[id] = Record(kind, id, workspace, doc)  # no await between the check and the write: atomic
        self._bump(kind, id)
        return True

    async def record_put_if(self, kind: str, id: str, workspace: str, doc: bytes, expected: bytes) -> bool:
        records = self._records.get(kind, {})
        old = records.get(id)
        if old is None or old.doc not in (expected, doc):
            return False
        records[id] = Record(kind, id, workspace, doc)  # no await between the check and the write: atomic
        self._bump(kind, id)
        return True

    def _bump(self, kind: str, id: str) -> None:
        self._version += 1
        count = self._kind_versions[kind] = self._kind_versions.get(kind, 0) + 1
        changes = self._change_logs.get(kind)
        if changes is None:
            changes = self._change_logs[kind] = deque(maxlen=RECORD_CHANGE_LOG)
        changes.append((count, id))
        self._record_changed(kind, id)

    async def record_get(self, kind: str, id: str) -> Record | None:
        return self._records.get(kind, {}).get(id)

    async def record_delete(self, kind: str, id: str) -> bool:
        if self._records.get(kind, {}).pop(id, None) is None:
            return False
        self._bump(kind, id)
        return True

    async def record_delete_if(self, kind: str, id: str, expected: bytes) -> bool:
        records = self._records.get(kind, {})
        old = records.get(id)
        if old is None or old.doc != expected:
            return False
        del records[id]
        self._bump(kind, id)
        return True

    async def record_list(self, kind: str, workspace: str | None = None) -> list[Record]:
        records = self._records.get(kind, {})
        return [records[i] for i in sorted(records) if workspace is None or records[i].workspace == workspace]

    async def records_version(self) -> int:
        return self._version

    async def record_versions(self, kinds: Sequence[str], since: Sequence[int] = ()) -> RecordVersions:
        counts = tuple(self._kind_versions.get(k, 0) for k in kinds)
        changed = tuple(logged_changes(count, after, self._change_logs.get(kind, ()))
                        for kind, count, after in zip(kinds, counts, since))
        return RecordVersions(counts, self._version, 0, changed)

    # -- logs ------------------------------------------------------------------------------------------------

    async def log_append(self, name: str, item: bytes, max_len: int) -> int:
        last, items = self._logs.setdefault(name, ([0], deque()))
        last[0] += 1
        items.append(item)
        while len(items) > max(max_len, 1):
            items.popleft()
        return last[0]

    async def log_read(self, name: str, after_seq: int, limit: int) -> list[tuple[int, bytes]]:
        log = self._logs.get(name)
        if log is None:
            return []
        last, items = log[0][0], log[1]
        first = last - len(items) + 1
        start = max(after_seq + 1, first)
        return [(seq, items[seq - first]) for seq in range(start, min(last, start + limit - 1) + 1)]
