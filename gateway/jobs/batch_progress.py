"""What the parts of one batch run share: why it stops, what it has counted, and its stored results.

The runner (states), the line dispatch, the watch (lease, cancel, window, key) and the finish each hold these
objects instead of reading one another's fields. See ``docs/jobs.md`` for the batch lifecycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from gateway.controlplane.keys import KeyRecord
from gateway.jobs.batch_output import OUTPUT, LineUsage, add_usage, result_usage
from gateway.jobs.batch_store import BatchStore
from gateway.schema.batches import BatchError, BatchUsage, RequestCounts
from gateway.state.base import StateStoreError
from gateway.waiting import wait_event

STOP_CANCEL, STOP_EXPIRE, STOP_LEASE = "cancelled", "expired", "lease"
#: the batch cannot go on (the key it runs as is gone, its headers do not open): it ends failed with ``failure``
STOP_FAILED = "failed"
#: stored results are fetched this many at a time
WINDOW = 128


@dataclass(slots=True)
class RunAs:
    """Who a batch's lines run as: the key (by id; its record as last read, None for records that carry the key in
    headers) and the headers every line is sent with."""

    key_id: str = ""
    #: the workspace the key belongs to (the batch's)
    workspace: str = ""
    key: KeyRecord | None = None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


class RunControl:
    """Why a run stops (the first reason wins; a lost lease overrides any), and the limit pause lines wait out."""

    def __init__(self) -> None:
        self.stop_reason: str | None = None
        #: why the batch stops ``failed`` (set with ``STOP_FAILED``)
        self.failure: BatchError | None = None
        self.pause_until = 0.0
        self._stopped = asyncio.Event()

    def stop(self, reason: str) -> None:
        if self.stop_reason is None or reason == STOP_LEASE:
            self.stop_reason = reason
        self._stopped.set()

    def fail_with(self, error: BatchError) -> None:
        if self.stop_reason is None:
            self.failure = error
            self.stop(STOP_FAILED)

    async def wait_stop(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the batch stops first (then True)."""
        return await wait_event(self._stopped, seconds)


class Tally:
    """The counts and usage of the lines that have a result, and which lines those are."""

    def __init__(self) -> None:
        self.counts = RequestCounts()
        self.usage = BatchUsage()
        self.done: set[int] = set()
        #: counts changed since the watch last published them (set by whoever counts a new answer)
        self.dirty = False

    def reset(self) -> None:
        """Start counting again (the total stays)."""
        self.counts = RequestCounts(total=self.counts.total)
        self.usage = BatchUsage()
        self.done.clear()

    def add(self, number: int, output: bool, usage: LineUsage | None) -> None:
        if output:
            self.counts.completed += 1
            add_usage(self.usage, usage)
        else:
            self.counts.failed += 1
        self.done.add(number)

    def add_stored(self, number: int, value: bytes) -> None:
        """Count a stored result once."""
        if number not in self.done:
            output = value[:1] == OUTPUT
            self.add(number, output, result_usage(value) if output else None)


class Results:
    """One batch's stored results: exactly one per line, whoever stored it first."""

    def __init__(self, store: BatchStore, batch_id: str, control: RunControl, tally: Tally) -> None:
        self.store = store
        self.batch_id = batch_id
        self.control = control
        self.tally = tally

    async def put(self, number: int, value: bytes, keep: int) -> bool:
        """Store a line's result (retrying while the store is unreachable); True when this call stored it."""
        while True:
            try:
                return await self.store.put_result(self.batch_id, number, value, keep)
            except StateStoreError:
                if self.control.stop_reason == STOP_LEASE:
                    return False
                await asyncio.sleep(1.0)

    async def read(self, numbers: Iterable[int]) -> AsyncIterator[tuple[int, bytes | None]]:
        """``(line, stored result or None)`` for line numbers, fetched in parallel windows; counts what it finds."""
        window: list[int] = []

        async def flush() -> list[tuple[int, bytes | None]]:
            values = await asyncio.gather(*(self.store.get_result(self.batch_id, n) for n in window))
            out = list(zip(window, values))
            window.clear()
            for number, value in out:
                if value is not None:
                    self.tally.add_stored(number, value)
            return out

        for number in numbers:
            window.append(number)
            if len(window) >= WINDOW:
                for item in await flush():
                    yield item
        if window:
            for item in await flush():
                yield item
