"""The StateStore interface: every piece of state shared between workers and instances goes through it.

Implementations (one shared test suite, ``tests/state``): ``memory.MemoryStateStore`` (one process),
``sqlite.SQLiteStateStore`` (the embedded default: exact across the worker processes of one machine) and
``redis.RedisStateStore`` (several instances; Redis or Redis Cluster). ``gateway.state.select.open_store`` picks
one from the settings.

Conventions for every method:
- Keys and names are ``str``; values are ``bytes``; counters and amounts are ``int`` (callers use the smallest
  unit: tokens, requests, micro-dollars). ``ttl_ms`` is a lifetime in milliseconds; ``None`` means no expiry.
- Each space below is its own namespace: a KV key ``"x"``, a cache key ``"x"`` and a budget key ``"x"`` never meet.
- Every call is bounded in time. A backend that cannot answer raises ``StateStoreUnavailable`` (after counting
  ``gateway_state_store_errors_total``); callers decide what that means (breakers and caches carry on as if
  nothing was stored; limits follow ``GATEWAY_STATE_FAIL_MODE``). While ``healthy`` is false a networked store
  fails fast instead of waiting on a dead server; its background probe restores ``healthy`` when the server
  answers again (reconnection is automatic).
- "Atomic" means: no other call, from any worker or instance using the same store, observes a partial effect.
"""

from __future__ import annotations

import abc
from typing import Callable, Iterable, Literal, Sequence

import msgspec


class StateStoreError(Exception):
    """A state-store call failed (the backend answered with an error)."""


class StateStoreUnavailable(StateStoreError):
    """The backend could not be reached in time (or is known to be down); nothing was changed by this call."""


class BudgetItem(msgspec.Struct, frozen=True, gc=False):
    """One counter a ``reserve`` checks and increments: ``used + amount <= limit`` admits it. A ``cut`` item (a
    token or cost budget) is admitted while its budget is not spent (``used < limit``, or an amount of 0), with
    its amount cut to what remains (``min(amount, limit - used)``).

    ``key`` names the counter inside the call's scope and encodes its window or period (``rpm:28712345``), so a
    rollover is a new key. ``key_ttl_ms`` is set when the counter is created (never extended): the window's end
    plus a margin.
    """

    key: str
    limit: int
    amount: int
    key_ttl_ms: int
    cut: bool = False


class Admission(msgspec.Struct, frozen=True, gc=False):
    """The answer of ``reserve``. Refused: ``index``/``key`` name the first item that would exceed its limit,
    ``used`` is that counter's current value and ``limit`` its limit. Admitted with a ``cut`` item's amount cut:
    ``amounts`` holds the amount reserved for each item (empty when every item got its whole amount)."""

    admitted: bool
    index: int = -1
    key: str = ""
    used: int = 0
    limit: int = 0
    amounts: tuple[int, ...] = ()


ADMITTED = Admission(True)


#: how many changes each record kind's change log keeps (the ids of its newest changes, by change number): a reader
#: that fell further behind than this (or whose gap holds a change an older release made, which logs nothing) learns
#: only that something of the kind changed
RECORD_CHANGE_LOG = 100


class RecordVersions(msgspec.Struct, frozen=True, gc=False):
    """Change counters of the records (``record_versions``): ``kinds`` one per kind asked for (bumped by every put
    and delete of a record of that kind), ``total`` bumped by every record change (``records_version``), and
    ``unkinded`` the changes made without kind counters (by an older release: readers take them as changes of
    every kind). All 0 before the first write. ``changed``, when ids were asked for (``since``): per kind, the ids
    of the records changed after the count given, or None when the kind's change log no longer holds every one of
    those changes (or none was asked for it)."""

    kinds: tuple[int, ...]
    total: int
    unkinded: int
    changed: tuple[tuple[str, ...] | None, ...] = ()


def logged_changes(count: int, since: int, entries: Iterable[tuple[int, str]]) -> tuple[str, ...] | None:
    """The ids of a kind changed after change number ``since`` up to ``count`` (its counter now), from its change
    log's ``entries`` (change number, id); None when ids were not asked for (``since`` < 0), the counter went back
    (a store restarted empty) or a change in the gap is missing from the log (trimmed, or made by an older
    release)."""
    if since < 0 or count < since:
        return None
    if count == since:
        return ()
    found = {number: id for number, id in entries if since < number <= count}
    if len(found) != count - since:
        return None
    return tuple(sorted(set(found.values())))


class Record(msgspec.Struct, frozen=True, gc=False):
    """A control-plane record: an opaque document owned by one workspace."""

    kind: str
    id: str
    workspace: str
    doc: bytes


#: what ``settle`` did: ``settled`` replaced a live reservation by the actual amounts; ``late`` found no live
#: reservation (it had expired and been released, or never existed) and charged the actual amounts to the counters
#: that still exist; ``duplicate`` found the id already settled and changed nothing.
SettleOutcome = Literal["settled", "late", "duplicate"]

#: how long a settled reservation id is remembered: a second ``settle`` of the same id within this time changes
#: nothing (retries and double calls are safe); much later it would be treated as ``late``.
SETTLED_KEEP_MS = 900_000


def reserved_amount(item: BudgetItem, used: int) -> int:
    """What ``item`` reserves on a counter at ``used``: its amount, or -1 when it does not fit (a ``cut`` item fits
    while ``used < limit`` and reserves at most what remains). The Redis script follows the same rule."""
    amount = item.amount
    if not item.cut:
        return amount if used + amount <= item.limit else -1
    if amount == 0:
        return 0
    return min(amount, item.limit - used) if used < item.limit else -1


def admitted(items: Sequence[BudgetItem], amounts: list[int]) -> Admission:
    """The Admission of items that all fit with these reserved ``amounts``."""
    if all(a == item.amount for a, item in zip(amounts, items)):
        return ADMITTED
    return Admission(True, amounts=tuple(amounts))


def check_reserve(items: Sequence[BudgetItem], reservation_id: str | None, ttl_ms: int | None) -> None:
    """The argument rules every backend enforces before touching anything (ValueError)."""
    if reservation_id is not None and (ttl_ms is None or ttl_ms <= 0):
        raise ValueError("reserve: a positive ttl_ms is required with a reservation_id")
    for item in items:
        if item.amount < 0:
            raise ValueError(f"reserve: amount of {item.key!r} is negative")


def check_settle(items: Sequence[BudgetItem], actual: Sequence[int]) -> None:
    if len(actual) != len(items):
        raise ValueError("settle: one actual amount per item")
    if any(a < 0 for a in actual):
        raise ValueError("settle: actual amounts are >= 0")


class StateStore(abc.ABC):
    #: backend name shown by /health: memory, embedded, redis, redis-cluster
    backend: str = "abstract"
    #: kept by a background probe (cheap to read); false while the backend cannot be reached
    healthy: bool = True
    #: told the kind and id of every record this process put or deleted, as soon as the store has done it
    _change_listeners: tuple[Callable[[str, str], None], ...] = ()

    def on_record_change(self, listener: Callable[[str, str], None]) -> None:
        """Call ``listener(kind, id)`` right after each record put or delete made through this store object (so
        this worker's cached copy is dropped before the writer answers; other workers poll ``record_versions``)."""
        self._change_listeners = (*self._change_listeners, listener)

    def _record_changed(self, kind: str, id: str) -> None:
        for listener in self._change_listeners:
            listener(kind, id)

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:  # noqa: B027 - an optional hook: the in-process store opens nothing
        """Open connections and start the health probe. A networked store that cannot reach its server still
        starts (``healthy`` false) and connects when the server comes back."""

    async def close(self) -> None:  # noqa: B027 - an optional hook: the in-process store holds nothing
        """Stop the probe and close connections; no call may follow."""

    # -- key-value with TTL ----------------------------------------------------------------------------------

    @abc.abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The value, or None when missing or expired. A counter made by ``incr`` reads as its decimal bytes."""

    @abc.abstractmethod
    async def set(self, key: str, value: bytes, ttl_ms: int | None = None) -> None:
        """Store ``value``, replacing any value and TTL."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove the key (no error when missing)."""

    @abc.abstractmethod
    async def set_if_absent(self, key: str, value: bytes, ttl_ms: int | None = None) -> bool:
        """Store ``value`` only when the key is missing or expired; True when this call stored it."""

    @abc.abstractmethod
    async def incr(self, key: str, amount: int = 1, ttl_ms: int | None = None) -> int:
        """Add ``amount`` and return the new value; ``ttl_ms`` is set when the key is created, never extended."""

    # -- response cache space --------------------------------------------------------------------------------

    @abc.abstractmethod
    async def cache_get(self, key: str) -> bytes | None:
        """A cached value, or None (missing, expired or evicted). A hit counts as a use for LRU eviction."""

    @abc.abstractmethod
    async def cache_set(self, key: str, value: bytes, ttl_ms: int) -> None:
        """Cache ``value`` for ``ttl_ms``. The space is bounded: the embedded and memory stores evict the least
        recently used entries beyond ``GATEWAY_STATE_CACHE_MAX_ENTRIES`` / ``_MAX_BYTES`` (a value larger than
        the byte bound is not stored); Redis evicts by its own ``maxmemory-policy``."""

    # -- leases ----------------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def lease(self, key: str, holder: str, ttl_ms: int) -> bool:
        """Acquire the lease for ``holder`` when free or expired, or renew it (a fresh ``ttl_ms``) when
        ``holder`` already holds it; False while another holder's lease is live."""

    @abc.abstractmethod
    async def release(self, key: str, holder: str) -> bool:
        """Give the lease up when ``holder`` holds it; True when released, False when held by another or free."""

    # -- budgets (rate and usage limits) ---------------------------------------------------------------------

    @abc.abstractmethod
    async def reserve(self, scope: str, items: Sequence[BudgetItem], reservation_id: str | None = None,
                      ttl_ms: int | None = None) -> Admission:
        """Check and increment every item atomically: when each counter has ``used + amount <= limit`` (a ``cut`` item:
        ``used < limit`` or an amount of 0) all are incremented (a cut item by at most ``limit - used``, the Admission's
        ``amounts`` then saying what each item reserved); otherwise nothing changes and the Admission names the first
        item (in order) that would exceed. ``scope`` groups the counters of one call (callers use the workspace id; on
        Redis Cluster it is the hash tag). Without ``reservation_id`` the increment is final (request counts). With one
        (the request id), the reservation is remembered for ``ttl_ms`` (required then): ``settle`` replaces it by the
        actual amounts, and a reservation still unsettled when ``ttl_ms`` runs out is released (its amounts subtracted
        from the counters that still exist) at the latest by the next budget call on the same scope, so a dead worker
        cannot leak it. An id that is live or settled in this scope admits without changing anything (a reserve retried
        after a lost answer does not count twice)."""

    @abc.abstractmethod
    async def settle(self, scope: str, reservation_id: str, items: Sequence[BudgetItem],
                     actual: Sequence[int]) -> SettleOutcome:
        """Replace the reserved amounts by ``actual`` (one per item, in the order of the reservation's items)
        exactly once, atomically. ``items`` are the reserved items (their ``key`` and ``key_ttl_ms`` are used
        only when the reservation is gone: see ``SettleOutcome``). Counters may end above their limit here:
        the overshoot is the estimate's error. The id is remembered for ``SETTLED_KEEP_MS``."""

    @abc.abstractmethod
    async def usage(self, scope: str, keys: Sequence[str]) -> list[int]:
        """Current values of the counters (0 when missing or expired), after releasing expired reservations."""

    # -- circuit breakers ------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def breaker_open_until(self, key: str) -> int:
        """Epoch ms at which the breaker's last cooldown ends or ended; 0 while closed. Callers compare it with
        their clock: later than now is open (skip the target), earlier is half-open (the next result decides)."""

    @abc.abstractmethod
    async def breaker_failure(self, key: str, threshold: int, window_ms: int, cooldown_ms: int,
                              now_ms: int) -> bool:
        """Count a failure at ``now_ms``; True when this call opened the breaker. It opens (cooldown until
        ``now_ms + cooldown_ms``, count cleared) when ``threshold`` failures fall within the last ``window_ms``,
        or at once when half-open. A failure while open (a request that started before it opened) is ignored.
        Successes never erase failures: a target failing every other request still opens."""

    @abc.abstractmethod
    async def breaker_success(self, key: str, now_ms: int) -> None:
        """A success closes a half-open breaker (and clears its count); while closed or open it changes nothing.
        Callers may skip this call when their last ``breaker_open_until`` read was 0."""

    # -- control-plane records -------------------------------------------------------------------------------

    @abc.abstractmethod
    async def record_put(self, kind: str, id: str, workspace: str, doc: bytes) -> int:
        """Create or replace a record; returns the new records version (bumped by every put and delete). The
        kind's counter is bumped too, the id logged under the kind's new count in the same atomic write (the last
        ``RECORD_CHANGE_LOG`` are kept), and this process's change listeners are told (``on_record_change``)."""

    @abc.abstractmethod
    async def record_create(self, kind: str, id: str, workspace: str, doc: bytes) -> bool:
        """Store a new record only while no record of ``kind`` is stored under ``id``: checked and written (with
        the workspace's listing, counters, change log and listeners as ``record_put``) in one atomic step; True
        when stored. False changes nothing: another create (or an older record) holds the id. A record that
        already holds ``doc`` also answers True, changing nothing (so a call retried after a lost reply answers
        as its first attempt did)."""

    @abc.abstractmethod
    async def record_put_if(self, kind: str, id: str, workspace: str, doc: bytes, expected: bytes) -> bool:
        """Replace a record only while it is as it was read: ``doc`` is stored (as ``record_put`` stores it) when
        the record exists and its stored doc is byte for byte ``expected``, checked and written in one atomic
        step; True when stored. False changes nothing: the record changed or was deleted since it was read (the
        caller reads it again and retries, or gives up). A record that already holds ``doc`` also answers True
        (so a call retried after a lost reply answers as its first attempt did)."""

    @abc.abstractmethod
    async def record_get(self, kind: str, id: str) -> Record | None:
        """The record, or None."""

    @abc.abstractmethod
    async def record_delete(self, kind: str, id: str) -> bool:
        """Delete a record; True when it existed (only then are the versions bumped, the id logged and listeners
        told)."""

    @abc.abstractmethod
    async def record_delete_if(self, kind: str, id: str, expected: bytes) -> bool:
        """Delete a record only while its stored doc is byte for byte ``expected`` (checked and deleted in one
        atomic step, counted and told as ``record_delete``); False changes nothing: the record changed since it
        was read, or is gone."""

    @abc.abstractmethod
    async def record_list(self, kind: str, workspace: str | None = None) -> list[Record]:
        """Every record of ``kind`` (of one workspace when given), ordered by id."""

    @abc.abstractmethod
    async def records_version(self) -> int:
        """A counter bumped by every record write, in every worker and instance. 0 before the first write."""

    @abc.abstractmethod
    async def record_versions(self, kinds: Sequence[str], since: Sequence[int] = ()) -> RecordVersions:
        """The change counters of ``kinds`` (one each, in order), with the total and the unkinded count, read at
        once; ``watch.RecordWatcher`` polls this, so a change of one kind drops only the caches of that kind.
        ``since`` (one per kind when given; -1 for a kind whose ids are not wanted) asks for the ids changed after
        each count too, read in the same call (``RecordVersions.changed``, ``logged_changes``), so a cache can drop
        only the records that changed."""

    # -- append-only logs ------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def log_append(self, name: str, item: bytes, max_len: int) -> int:
        """Append ``item`` to the log ``name`` and return its sequence number (1, 2, ...); only the newest
        ``max_len`` items are kept."""

    @abc.abstractmethod
    async def log_read(self, name: str, after_seq: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` items with ``seq > after_seq``, oldest first. When the first returned seq is not
        ``after_seq + 1`` the items between were trimmed: a reader that must see everything rebuilds."""
