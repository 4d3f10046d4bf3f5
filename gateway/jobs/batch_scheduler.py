"""Finding gateway-run batches to run: each worker polls the unfinished batches and runs those whose lease it gets.

The lease (``StateStore.lease``, ``GATEWAY_BATCH_LEASE_MS``) makes exactly one runner work on a batch across every
worker and instance sharing the store; its runner renews it a few times per lease period. When the holder dies
(crash, SIGKILL, lost host) its lease lapses and the next worker to poll (every ``GATEWAY_BATCH_POLL_MS``) takes
the batch over and resumes it. A worker shutting down cleanly stops its runners and gives their leases up at once.
Holder ids are random per process, so a restarted process waits for its old lease to lapse like anyone else.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from functools import partial
from typing import Awaitable, Callable

from gateway.background import BackgroundTask
from gateway.http.errors import GatewayError
from gateway.jobs.batch_deps import RunnerDeps
from gateway.jobs.batch_store import lease_key
from gateway.state.base import StateStoreError
from gateway.waiting import wait_event

log = logging.getLogger("gateway.jobs")


class BatchScheduler:
    def __init__(self, deps: RunnerDeps) -> None:
        self.deps = deps
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        #: batch id -> the runner this worker runs it with (a runner that ends leaves)
        self.running: dict[str, BackgroundTask] = {}
        self._wake: asyncio.Event | None = None
        self._scanner = BackgroundTask("gateway-batch-scheduler")

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._scanner.start(self._loop)

    def poke(self) -> None:
        """Look for work now (a batch was created or cancelled in this worker)."""
        if self._wake is not None:
            self._wake.set()

    async def _loop(self) -> None:
        interval = self.deps.settings.batch_poll_ms / 1000
        wake = self._wake
        assert wake is not None  # start() made it
        while True:
            try:
                await self.scan()
            except (StateStoreError, GatewayError) as exc:
                log.debug("batch scan skipped: %s", exc)
            except Exception:  # the scheduler must outlive any one bad pass
                log.exception("batch scan failed")
            await wait_event(wake, interval)
            wake.clear()

    async def scan(self) -> None:
        batches = self.deps.batches
        for batch_id in await batches.active_ids():
            if batch_id in self.running:
                continue
            if self._scanner.closed:  # the worker is stopping: no new runner
                return
            if not await batches.store.lease(lease_key(batch_id), self.holder, self.deps.settings.batch_lease_ms):
                continue
            from gateway.jobs.batch_runner import BatchRunner  # loaded with the first batch this worker runs

            runner = BatchRunner(self.deps, batch_id, self.holder)
            task = self.running[batch_id] = BackgroundTask(f"batch-{batch_id}")  # a crash is logged by its name
            task.start(partial(self._run, batch_id, runner.run))

    async def _run(self, batch_id: str, run: Callable[[], Awaitable[None]]) -> None:
        try:
            await run()
        finally:
            self.running.pop(batch_id, None)

    async def close(self) -> None:
        """Stop looking for work, then stop every runner (each gives its lease up as it unwinds)."""
        await self._scanner.close()
        await asyncio.gather(*(task.close() for task in list(self.running.values())))
        self.running.clear()  # a runner cancelled before it began never left by itself
