"""The live tail of the shared store: ``LISTEN gateway_logs`` on one connection per worker while a console is
connected, fanning every instance's new rows out as ``LogTail`` does for the embedded store.

Why LISTEN/NOTIFY rather than polling by id: ids come from a sequence, which hands them out at insert time, not in
commit order. Two instances writing at once commit out of id order, so a poller that remembers "the last id seen"
misses the rows committed after it read a larger id (polling back over a window instead reads everything twice
and still has no sure bound). A notification is sent at commit, in commit order, naming the batch the commit stored;
the listener reads exactly that batch (``request_logs_batch`` index, one partition by its time range). It costs
nothing while nobody listens, and a row reaches the console within a few milliseconds of its commit instead of a
polling interval.

Notifications sent while the listening connection is down never arrive, so a listener that comes back catches up:
once LISTEN is in place again it reads which batches were stored with a number above the newest it delivered (less
``CATCH_UP_MARGIN``: a batch number is taken when its write begins, so one begun a moment earlier may commit later)
and delivers those it has not, as if notified; a notification for a batch already delivered is skipped. Streams
therefore miss no record across a lost connection, a restarted database or a failover (the records wait in the
writers' spools meanwhile, and are notified when written). A catch-up reads the newest ``MAX_WAITING`` batches at
most: the records of older ones are counted to every stream as skipped (an ``event: skipped``), as a burst beyond
what a read takes is.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from gateway.background import BackgroundTask
from gateway.observability.logtail import MAX_ROWS, LogTail, Subscriber
from gateway.observability.pglog.store import CHANNEL, PgLogStore
from gateway.waiting import within

RECONNECT_S = 1.0
READY_WAIT_S = 2.0
#: notifications kept waiting at most (beyond, the oldest are skipped and counted)
MAX_WAITING = 1000
#: batches begun before the newest delivered one that may still commit after it (read again when catching up)
CATCH_UP_MARGIN = 64
#: delivered batch numbers remembered (so a caught-up batch is not delivered again by its late notification)
SEEN_BATCHES = 4096


class PgLogTail(LogTail):
    def __init__(self, store: PgLogStore, max_rows: int = MAX_ROWS) -> None:
        super().__init__("", max_rows=max_rows)
        self.store = store
        self._poller = BackgroundTask("log-tail-listen")
        self._ready = asyncio.Event()
        #: delivered batch numbers, oldest first (bounded by ``SEEN_BATCHES``), and the newest of them
        self._seen: dict[int, None] = {}
        self._newest_batch = 0
        #: the newest batch whose records a catch-up past its limit counted as skipped (never counted twice)
        self._counted_through = 0

    async def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; the first one starts listening, and returns once LISTEN is in place (or after
        ``READY_WAIT_S`` when the store does not answer), so a backlog read after this call misses nothing."""
        async with self._starting:
            if not self._poller.running and not self._poller.closed:
                self._ready.clear()
                self._poller.start(self._listen)
            self.subscribers.add(subscriber)
        try:
            await within(self._ready.wait(), READY_WAIT_S)
        except TimeoutError:
            pass

    async def _listen(self) -> None:
        warned = False
        listened = False  # a connection listened before this one: what it missed is read on the next
        while self.subscribers:
            notes: asyncio.Queue[str] = asyncio.Queue()
            try:
                conn = await self.store.connect()
            except Exception as exc:  # noqa: BLE001 - down: try again while someone listens
                if not warned:
                    warned = True
                    print(f"gateway: log stream cannot listen ({exc.__class__.__name__}); retrying",
                          file=sys.stderr, flush=True)
                await asyncio.sleep(RECONNECT_S)
                continue
            try:
                await conn.add_listener(CHANNEL, _enqueue(notes))
                self._ready.set()
                if listened:
                    await self._catch_up()
                listened = True
                while self.subscribers and not conn.is_closed():
                    try:
                        first = await within(notes.get(), self.interval_s * 4)
                    except TimeoutError:
                        continue
                    payloads = [first]
                    while not notes.empty():
                        payloads.append(notes.get_nowait())
                    await self._deliver(payloads)
            except Exception:  # noqa: BLE001 - a lost connection: listen again
                await asyncio.sleep(RECONNECT_S)
            finally:
                conn.terminate()

    async def _catch_up(self) -> None:
        """Deliver the batches stored while no connection listened (those the newest delivered does not cover)."""
        if not self._newest_batch:
            return  # nothing was delivered yet: a stream's backlog read covers the time before it
        start = max(0, self._newest_batch - CATCH_UP_MARGIN)
        delivered = [batch for batch in self._seen if batch > start]
        found, older = await self.store.batches_after(start, MAX_WAITING, delivered, self._counted_through)
        if older:  # more were missed than a catch-up reads: the oldest are skipped, and said to be (once)
            self.fan_out([], older)
            self._counted_through = found[0][0] - 1
        payloads = [f"{batch} {low!r} {high!r} {count}" for batch, low, high, count in found]
        if payloads:
            await self._deliver(payloads)

    def _note(self, batch: int) -> None:
        """Remember ``batch`` as delivered (or counted as skipped)."""
        seen = self._seen
        seen[batch] = None
        if len(seen) > SEEN_BATCHES:
            del seen[next(iter(seen))]
        self._newest_batch = max(self._newest_batch, batch)

    async def _deliver(self, payloads: list[str]) -> None:
        payloads = [p for p in payloads if _batch(p) not in self._seen]  # caught up before its notification came
        skipped = 0
        skipped_notes: list[str] = []
        if len(payloads) > MAX_WAITING:
            skipped_notes, payloads = payloads[:-MAX_WAITING], payloads[-MAX_WAITING:]
            skipped += sum(_count(p) for p in skipped_notes)
        rows: list[Any] = []
        for payload in reversed(payloads):  # newest first, so a burst beyond max_rows skips the oldest
            if len(rows) >= self.max_rows:
                skipped += _count(payload)
                continue
            batch, low, high, _ = payload.split()
            rows[:0] = await self.store.batch_rows(int(batch), float(low), float(high))
        if rows or skipped:
            self.fan_out(rows, skipped)
        for payload in skipped_notes + payloads:  # noted once handed out: a read that failed is read again
            self._note(_batch(payload))


def _batch(payload: str) -> int:
    try:
        return int(payload.split(" ", 1)[0])
    except ValueError:
        return 0


def _count(payload: str) -> int:
    try:
        return int(payload.split()[3])
    except (IndexError, ValueError):
        return 0


def _enqueue(notes: asyncio.Queue[str]) -> Any:
    def on_note(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        notes.put_nowait(payload)

    return on_note
