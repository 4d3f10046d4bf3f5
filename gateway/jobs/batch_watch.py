"""Watching a running batch: renew its lease, stop it on a cancel, the end of its window or its key's revocation,
and publish its live counts. See ``docs/jobs.md`` for how each stop ends the batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgspec

from gateway.controlplane.keys import KeyStore
from gateway.http.errors import ServiceUnavailable
from gateway.jobs.batch_finish import key_revoked
from gateway.jobs.batch_progress import STOP_CANCEL, STOP_EXPIRE, STOP_LEASE, RunAs, RunControl, Tally
from gateway.jobs.batch_store import BatchStore, LiveCounts, keep_until, lease_key
from gateway.schema.batches import Batch
from gateway.settings import Settings
from gateway.state.base import StateStoreError

log = logging.getLogger("gateway.jobs")


class RunWatch:
    """The lease and the stop conditions of one batch run."""

    def __init__(self, batch_id: str, holder: str, settings: Settings, store: BatchStore, keys: KeyStore,
                 batch: Callable[[], Batch | None], run_as: RunAs, control: RunControl, tally: Tally) -> None:
        self.batch_id = batch_id
        #: the batch as last saved (None until the run loaded it)
        self.batch = batch
        self.holder = holder
        self.settings = settings
        self.store = store
        self.keys = keys
        self.run_as = run_as
        self.control = control
        self.tally = tally

    async def keep(self) -> None:
        """Renew the lease, watch for a cancel or the window's end, and publish the live counts (until cancelled or
        the lease is lost)."""
        settings = self.settings
        interval = min(settings.batch_poll_ms, settings.batch_lease_ms / 3) / 1000
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self.store.store.lease(lease_key(self.batch_id), self.holder, settings.batch_lease_ms):
                    log.warning("batch %s: lease lost; another runner carries on", self.batch_id)
                    self.control.stop(STOP_LEASE)
                    return
                renewed = time.monotonic()
                batch = self.batch()
                if batch is not None:
                    await self._watch(batch)
            except StateStoreError:
                if time.monotonic() - renewed > settings.batch_lease_ms / 1000:
                    self.control.stop(STOP_LEASE)
                    return

    async def check_key(self) -> None:
        """Read the key the batch runs as; stop the batch (failed) when it was revoked."""
        run_as = self.run_as
        if not run_as.key_id or self.control.stop_reason is not None:
            return
        key = await self.keys.by_id(run_as.key_id, run_as.workspace)
        if key is not None:
            run_as.key = key
        else:
            log.warning("batch %s: the gateway key %s that created it was revoked; stopping", self.batch_id,
                        run_as.key_id)
            self.control.fail_with(key_revoked(run_as.key_id))

    async def check_stop(self, batch: Batch) -> None:
        """Stop on a recorded cancel or the end of the batch's window."""
        if await self.store.cancel_requested(self.batch_id):
            self.control.stop(STOP_CANCEL)
        elif batch.expires_at and time.time() >= batch.expires_at:
            self.control.stop(STOP_EXPIRE)

    async def _watch(self, batch: Batch) -> None:
        try:
            await self.check_key()
        except ServiceUnavailable:  # the store did not answer: the key read at the start stands until it does
            pass
        if self.control.stop_reason is None:
            await self.check_stop(batch)
        tally = self.tally
        if tally.dirty:
            tally.dirty = False
            await self.store.put_counts(self.batch_id, LiveCounts(msgspec.structs.replace(tally.counts), tally.usage),
                                        keep_until(batch))


