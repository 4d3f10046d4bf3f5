"""Record-change watcher: a per-worker background poller of the store's records version that tells subscribers
when any control-plane record changed, in this worker, another worker or another instance.

Per-worker caches (gateway keys, saved configs, provider slugs) subscribe a callback that drops their entries;
requests keep reading their caches and never touch the store for this. The poll reads one integer every
``interval_ms`` (about 250 ms: a change reaches every worker within a second) and only while someone has
subscribed. When the store cannot be read, the next successful read notifies subscribers even if the version
looks unchanged (changes made during the outage are not missed). Callbacks run on the event loop and must be
quick; an exception in one is logged and does not stop the others.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from gateway.state.base import StateStore, StateStoreError
from gateway.waiting import cancel_and_wait

log = logging.getLogger("gateway.state")


class RecordWatcher:
    def __init__(self, store: StateStore, interval_ms: int = 250) -> None:
        self.store = store
        self.interval_s = interval_ms / 1000
        self.version: int | None = None
        self._subscribers: list[Callable[[], None]] = []
        self._task: asyncio.Task | None = None
        self._stale = False

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every change of any record (and after a store outage ends)."""
        self._subscribers.append(callback)

    async def start(self) -> None:
        """Read the current version (the baseline) and start polling."""
        if self._task is None:
            await self.poll()
            self._task = asyncio.create_task(self._run(), name="gateway-record-watcher")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def poll(self) -> bool:
        """Read the version once; notify subscribers when it moved. True when they were notified."""
        try:
            version = await self.store.records_version()
        except StateStoreError:
            self._stale = True
            return False
        changed = (self.version is not None and version != self.version) or self._stale
        self.version = version
        self._stale = False
        if changed:
            self._notify()
        return changed

    def _notify(self) -> None:
        for callback in list(self._subscribers):
            try:
                callback()
            except Exception:  # one bad subscriber must not starve the others
                log.exception("record watcher: a subscriber failed")

    async def _run(self) -> None:
        while True:
            if self._subscribers:
                await self.poll()
            await asyncio.sleep(self.interval_s)
