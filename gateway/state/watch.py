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

Per record: a subscriber may also give ``forget``, told which records changed (``{kind: ids}``) instead of being
told to drop everything. The same poll reads the ids changed since the last one from each kind's change log
(``StateStore.record_versions(kinds, since)``, one round trip); when the log does not cover the gap (more than
``base.RECORD_CHANGE_LOG`` changes since, a change an older release made and logged nothing of) or the store was
unreachable, ``callback`` drops everything as before. So a key created or revoked in one workspace costs the other
workspaces' cached keys nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Collection, Mapping

from gateway.background import BackgroundTask
from gateway.state.base import RecordVersions, StateStore, StateStoreError

log = logging.getLogger("gateway.state")


#: told which records changed: record ids per kind
Forget = Callable[[Mapping[str, frozenset[str]]], None]


class _Subscriber:
    __slots__ = ("callback", "kinds", "forget")

    def __init__(self, callback: Callable[[], None], kinds: frozenset[str] | None, forget: Forget | None) -> None:
        self.callback = callback
        self.kinds = kinds
        self.forget = forget


class RecordWatcher:
    def __init__(self, store: StateStore, interval_ms: int = 250) -> None:
        self.store = store
        self.interval_s = interval_ms / 1000
        #: the counters last read (None before the first read), and each kind's by name
        self.versions: RecordVersions | None = None
        self._seen: dict[str, int] = {}
        self._kinds: tuple[str, ...] = ()
        #: the kinds some subscriber wants the changed ids of
        self._per_record: frozenset[str] = frozenset()
        self._subscribers: list[_Subscriber] = []
        #: the poll loop while the watcher runs (a new one for each start)
        self._task: BackgroundTask | None = None
        self._stale = False
        store.on_record_change(self._changed_here)

    def subscribe(self, callback: Callable[[], None], kinds: Collection[str] | None = None, *,
                  forget: Forget | None = None) -> None:
        """Call ``callback()`` after every change of a record of one of ``kinds`` (of any kind when None), and after
        a store outage ends. With ``forget`` (and ``kinds``), call ``forget({kind: ids})`` instead whenever the
        records that changed are known."""
        self._subscribers.append(_Subscriber(callback, None if kinds is None else frozenset(kinds),
                                             None if kinds is None else forget))
        if kinds is not None:
            self._kinds = tuple(sorted({*self._kinds, *kinds}))
            if forget is not None:
                self._per_record = self._per_record.union(kinds)

    async def start(self) -> None:
        """Read the current counters (the baseline) and start polling."""
        if self._task is None:
            await self.poll()
            self._task = BackgroundTask("gateway-record-watcher")
            self._task.start(self._run)

    async def close(self) -> None:
        if self._task is not None:
            await self._task.close()
        self._task = None

    async def poll(self) -> bool:
        """Read the counters once; notify the subscribers of the kinds that moved. True when any was notified."""
        kinds, seen = self._kinds, self._seen
        since = [seen.get(k, -1) if k in self._per_record else -1 for k in kinds] if self._per_record else ()
        try:
            now = await self.store.record_versions(kinds, since)
        except StateStoreError:
            self._stale = True
            return False
        before, stale = self.versions, self._stale
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
        ids = {kind: frozenset(changed) for kind, changed in zip(kinds, now.changed)
               if changed is not None and kind in moved}
        return self._notify(lambda subscriber: any_change if subscriber.kinds is None
                            else not subscriber.kinds.isdisjoint(moved), moved, ids)

    def _changed_here(self, kind: str, id: str) -> None:
        """The record ``kind``/``id`` was written through this worker's store: its subscribers drop it now."""
        self._notify(lambda subscriber: subscriber.kinds is None or kind in subscriber.kinds, frozenset((kind,)),
                     {kind: frozenset((id,))})

    def _notify(self, wanted: Callable[[_Subscriber], bool], moved: frozenset[str] = frozenset(),
                ids: Mapping[str, frozenset[str]] | None = None) -> bool:
        """Tell the ``wanted`` subscribers: ``forget`` the records in ``ids`` when those name the changes of every
        kind of theirs that ``moved``, else ``callback`` (drop everything)."""
        told = False
        for subscriber in list(self._subscribers):
            if not wanted(subscriber):
                continue
            told = True
            try:
                forget, kinds = subscriber.forget, subscriber.kinds
                if forget is not None and kinds is not None and ids is not None and all(
                        kind in ids for kind in kinds & moved):
                    forget({kind: changed for kind, changed in ids.items() if kind in kinds})
                else:
                    subscriber.callback()
            except Exception:  # one bad subscriber must not starve the others
                log.exception("record watcher: a subscriber failed")
        return told

    async def _run(self) -> None:
        while True:
            if self._subscribers:
                await self.poll()
            await asyncio.sleep(self.interval_s)
