"""The live tail of the shared store: ``LISTEN gateway_logs`` on one connection per worker while a console is
connected, fanning every instance's new rows out as ``LogTail`` does for the embedded store.

Why LISTEN/NOTIFY rather than polling by id: ids come from a sequence, which hands them out at insert time, not in
commit order. Two instances writing at once commit out of id order, so a poller that remembers "the last id seen"
misses the rows committed after it read a larger id (polling back over a window instead reads everything twice
and still has no sure bound). A notification is sent at commit, in commit order, naming the batch the commit stored;
the listener reads exactly that batch (``request_logs_batch`` index, one partition by its time range). It costs
nothing while nobody listens, and a row reaches the console within a few milliseconds of its commit instead of a
polling interval. Notifications sent while the listening connection is down are lost: the stream reconnects and
goes on (the console's reload reads the backlog from ``/v1/logs``).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from gateway.observability.logtail import MAX_ROWS, LogTail, Subscriber
from gateway.observability.pglog.store import CHANNEL, PgLogStore
from gateway.waiting import within

RECONNECT_S = 1.0
READY_WAIT_S = 2.0
#: notifications kept waiting at most (beyond, the oldest are skipped and counted)
MAX_WAITING = 1000


class PgLogTail(LogTail):
    def __init__(self, store: PgLogStore, max_rows: int = MAX_ROWS) -> None:
        super().__init__("", max_rows=max_rows)
        self.store = store
        self._ready = asyncio.Event()

    async def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; the first one starts listening, and returns once LISTEN is in place (or after
        ``READY_WAIT_S`` when the store does not answer), so a backlog read after this call misses nothing."""
        async with self._starting:
            if self._task is None or self._task.done():
                self._ready.clear()
                self._task = asyncio.get_running_loop().create_task(self._listen(), name="log-tail-listen")
            self.subscribers.add(subscriber)
        try:
            await within(self._ready.wait(), READY_WAIT_S)
        except TimeoutError:
            pass

    async def _listen(self) -> None:
        warned = False
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

    async def _deliver(self, payloads: list[str]) -> None:
        skipped = 0
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


def _count(payload: str) -> int:
    try:
        return int(payload.split()[3])
    except (IndexError, ValueError):
        return 0


def _enqueue(notes: asyncio.Queue[str]) -> Any:
    def on_note(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        notes.put_nowait(payload)

    return on_note
