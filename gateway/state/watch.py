"""Record-change watcher: a per-worker background poller of the store's record counters that tells each subscriber
when a record of a kind it follows changed, in this worker, another worker or another instance.

Per-worker caches (gateway keys, saved configs and provider slugs, policies, saved guardrails) subscribe a callback
that drops their entries, naming the record kinds they hold; requests keep reading their caches and never touch the
store for this. Counters are kept per kind (``StateStore.record_versions``), so a write of one kind (a file, a batch,
another tenant's prompt) never drops the caches of another: cached gateway keys stay when anything but a key
changes, and keep serving if the store then goes down. A subscriber that names no kinds hears of every change.

The poll reads the counters once every ``interval_ms`` (about 250 ms: a change reaches every worker within a
second) and only while someone has subscribed. A write made through this worker's store is told at once
(``StateStore.on_record_change``), before the writer answers. Changes made by an older release (which counts no
kinds) reach every subscriber. When the store cannot be read, the next successful read notifies every subscriber
even if the counters look unchanged (a store restarted empty may count back up to the same numbers). Callbacks run
on the event loop and must be quick; an exception in one is logged and does not stop the others.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Collection

from gateway.state.base import RecordVersions, StateStore, StateStoreError
from gateway.waiting import cancel_and_wait

log = logging.getLogger("gateway.state")


class _Subscriber:
    __slots__ = ("callback", "kinds")

    def __init__(self, callback: Callable[[], None], kinds: frozenset[str] | None) -> None:
        self.callback = callback
        self.kinds = kinds


class RecordWatcher:
    def __init__(self, store: StateStore, interval_ms: int = 250) -> None:
        self.store = store
        self.interval_s = interval_ms / 1000
        #: the counters last read (None before the first read), and each kind's by name
        self.versions: RecordVersions | None = None
        self._seen: dict[str, int] = {}
        self._kinds: tuple[str, ...] = ()
        self._subscribers: list[_Subscriber] = []
        self._task: asyncio.Task | None = None
        self._stale = False
        store.on_record_change(self._changed_here)

    def subscribe(self, callback: Callable[[], None], kinds: Collection[str] | None = None) -> None:
        """Call ``callback()`` after every change of a record of one of ``kinds`` (of any kind when None), and after
        a store outage ends."""
        self._subscribers.append(_Subscriber(callback, None if kinds is None else frozenset(kinds)))
        if kinds is not None:
            self._kinds = tuple(sorted({*self._kinds, *kinds}))

    async def start(self) -> None:
        """Read the current counters (the baseline) and start polling."""
        if self._task is None:
            await self.poll()
            self._task = asyncio.create_task(self._run(), name="gateway-record-watcher")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def poll(self) -> bool:
        """Read the counters once; notify the subscribers of the kinds that moved. True when any was notified."""
        kinds = self._kinds
        try:
            now = await self.store.record_versions(kinds)
        except StateStoreError:
            self._stale = True
            return False
        before, seen, stale = self.versions, self._seen, self._stale
        self.versions = now
        self._seen = dict(zip(kinds, now.kinds))
        self._stale = False
        if stale:
            return self._notify(lambda subscriber: True)
        if before is None:
            return False
        if now.unkinded != before.unkinded:  # an older release changed something: it could be anything
            return self._notify(lambda subscriber: True)
        any_change = now.total != before.total
        # a kind followed since the last read has no count to compare: any change since then may be one of it
        moved = frozenset(k for k, new in self._seen.items() if seen.get(k, -1 if any_change else new) != new)
        return self._notify(lambda subscriber: any_change if subscriber.kinds is None
                            else not subscriber.kinds.isdisjoint(moved))

    def _changed_here(self, kind: str) -> None:
        """A record of ``kind`` was written through this worker's store: its subscribers drop their entries now."""
        self._notify(lambda subscriber: subscriber.kinds is None or kind in subscriber.kinds)

    def _notify(self, wanted: Callable[[_Subscriber], bool]) -> bool:
        told = False
        for subscriber in list(self._subscribers):
            if not wanted(subscriber):
                continue
            told = True
            try:
                subscriber.callback()
            except Exception:  # one bad subscriber must not starve the others
                log.exception("record watcher: a subscriber failed")
        return told

    async def _run(self) -> None:
        while True:
            if self._subscribers:
                await self.poll()
            await asyncio.sleep(self.interval_s)
