"""The live tail of the request-log store: one poller per worker fanning new rows out to every connected console.

Records reach the store from every worker's recorder (about every half second); while at least one subscriber is
connected, one task per worker reads the rows added since its last look (every ``interval_s``) and hands each
subscriber the ones its filter matches, as ready-made server-sent-event frames. Nothing runs while nobody listens.

Bounded everywhere, so a slow or idle console never holds memory or slows requests:
- one read takes at most ``max_rows`` rows; when more arrived, the oldest are skipped (and reported as skipped);
- subscribers with the same scope and filter share one match pass and the same frame bytes;
- a subscriber keeps at most ``MAX_FRAMES`` frames and ``MAX_BUFFER_BYTES`` bytes waiting: older frames are dropped
  and counted, and the count is sent to the console as an ``event: skipped`` (rows skipped by a read that hit
  ``max_rows`` count for every subscriber, matching or not: they were never looked at).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import deque
from typing import Any, Callable

import msgspec

from gateway import sqlitefile
from gateway.background import BackgroundTask
from gateway.observability.logstore import LogFilter

MAX_FRAMES = 25  # per connection: with a read every 250 ms, at most 100 records a second reach a console
MAX_BUFFER_BYTES = 512 * 1024
INTERVAL_S = 0.25
MAX_ROWS = 2000

_SELECT_NEW = ("SELECT id, ts, workspace, trace_id, status, provider, doc FROM request_logs"
               " WHERE id > ? ORDER BY id LIMIT ?")
_SELECT_MAX = "SELECT MAX(id) FROM request_logs"


class _Head(msgspec.Struct):
    model: str | None = None


_head = msgspec.json.Decoder(_Head).decode

#: (id, ts, workspace, trace_id, status, provider, doc)
Row = tuple[int, float, Any, Any, int, Any, bytes]


def event_frame(row_id: int, doc: bytes) -> bytes:
    """One ``event: log`` frame: the ``GET /v1/logs`` item (``{"id": "<row id>", ...}``) as its data."""
    return b'id: %d\nevent: log\ndata: {"id":"%d",' % (row_id, row_id) + bytes(doc)[1:] + b"\n\n"


def row_matcher(flt: LogFilter, workspace: str | None, every_workspace: bool) -> Callable[[Row, Callable], bool]:
    """A predicate over store rows for one filter and scope (``model_of(row)`` decodes the model when asked)."""
    low = high = None
    if flt.status_class is not None:
        low, high = flt.status_class * 100, flt.status_class * 100 + 100

    def match(row: Row, model_of: Callable[[Row], str | None]) -> bool:
        _, ts, ws, trace_id, status, provider, _ = row
        if not every_workspace and ws != workspace:
            return False
        if flt.trace_id is not None and trace_id != flt.trace_id:
            return False
        if flt.status is not None and status != flt.status:
            return False
        if low is not None and not low <= status < high:  # type: ignore[operator]
            return False
        if flt.provider is not None and provider != flt.provider:
            return False
        if flt.since is not None and ts < flt.since:
            return False
        if flt.until is not None and ts > flt.until:
            return False
        return flt.model is None or model_of(row) == flt.model

    return match


class Subscriber:
    """One connected console: a bounded buffer of frames and an event that wakes its writer."""

    __slots__ = ("key", "match", "after_id", "frames", "size", "skipped", "wake")

    def __init__(self, key: tuple, match: Callable[[Row, Callable], bool]) -> None:
        self.key = key
        self.match = match
        #: rows up to this id were already sent (the backlog)
        self.after_id = 0
        self.frames: deque[tuple[int, bytes]] = deque()
        self.size = 0
        self.skipped = 0
        self.wake = asyncio.Event()

    def push(self, frames: list[tuple[int, bytes]], skipped: int = 0) -> None:
        buffer = self.frames
        after = self.after_id
        for item in frames:
            if item[0] <= after:
                continue
            buffer.append(item)
            self.size += len(item[1])
        self.skipped += skipped
        while buffer and (len(buffer) > MAX_FRAMES or self.size > MAX_BUFFER_BYTES):
            self.size -= len(buffer.popleft()[1])
            self.skipped += 1
        if buffer or self.skipped:
            self.wake.set()

    def skip_through(self, row_id: int) -> None:
        """Rows up to ``row_id`` were sent another way (the backlog): drop them from the buffer and from later
        pushes."""
        self.after_id = max(self.after_id, row_id)
        kept = deque(item for item in self.frames if item[0] > self.after_id)
        self.frames = kept
        self.size = sum(len(item[1]) for item in kept)

    def take(self) -> bytes:
        """Every waiting frame in one chunk, led by an ``event: skipped`` when frames were dropped."""
        out = b"".join(item[1] for item in self.frames)
        self.frames.clear()
        self.size = 0
        if self.skipped:
            out = b'event: skipped\ndata: {"skipped":%d}\n\n' % self.skipped + out
            self.skipped = 0
        return out


class LogTail:
    """Reads the rows added to the store and fans them out; started by the first subscriber, idle without any."""

    def __init__(self, path: str, interval_s: float = INTERVAL_S, max_rows: int = MAX_ROWS) -> None:
        self.path = path
        self.interval_s = interval_s
        self.max_rows = max_rows
        self.subscribers: set[Subscriber] = set()
        self.last_id: int | None = None
        self._conn: sqlite3.Connection | None = None
        #: reads the store while someone subscribes; ends by itself without subscribers, started again by the next
        self._poller = BackgroundTask("log-tail")
        self._starting = asyncio.Lock()

    async def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; the first one starts the poller at the store's newest row, so a backlog read after
        this call and the live rows meet without a gap."""
        async with self._starting:
            if not self._poller.running and not self._poller.closed:
                self.last_id = await asyncio.to_thread(self._newest)
                self._poller.start(self._run)
            self.subscribers.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    async def _run(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.interval_s)
                if not self.subscribers:
                    return
                try:
                    rows, skipped = await asyncio.to_thread(self._read)
                except sqlite3.Error:
                    rows, skipped = [], 0  # a locked or missing file: try again next tick
                if rows or skipped:
                    self.fan_out(rows, skipped)
        finally:  # no await from the last check of ``subscribers`` to here: subscribe() restarts a done task
            self.last_id = None  # a later first subscriber starts from the newest row again
            self._close_conn()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlitefile.connect(self.path, busy_timeout_ms=1000)
        return self._conn

    def _newest(self) -> int:
        try:
            return self._connection().execute(_SELECT_MAX).fetchone()[0] or 0
        except sqlite3.Error:
            return 0

    def _read(self) -> tuple[list[Row], int]:
        """The rows added since the last read (at most ``max_rows``, the newest) and how many were skipped."""
        conn = self._connection()
        newest = conn.execute(_SELECT_MAX).fetchone()[0] or 0
        last = self.last_id
        if last is None or newest < last:  # the store was emptied: start again from its newest row
            self.last_id = newest
            return [], 0
        skipped = 0
        if newest - last > self.max_rows:
            skipped = newest - last - self.max_rows
            last = newest - self.max_rows
        rows = conn.execute(_SELECT_NEW, (last, self.max_rows)).fetchall()
        if rows:
            self.last_id = rows[-1][0]
        return rows, skipped

    def fan_out(self, rows: list[Row], skipped: int = 0) -> None:
        """Hand each subscriber the frames of the rows its filter matches (one pass per distinct filter)."""
        frames: dict[int, bytes] = {}
        models: dict[int, str | None] = {}

        def model_of(row: Row) -> str | None:
            row_id = row[0]
            if row_id not in models:
                try:
                    models[row_id] = _head(row[6]).model
                except msgspec.DecodeError:
                    models[row_id] = None
            return models[row_id]

        shared: dict[tuple, tuple[list[tuple[int, bytes]], int]] = {}
        for subscriber in list(self.subscribers):
            hit = shared.get(subscriber.key)
            if hit is None:
                matched = [row for row in rows if subscriber.match(row, model_of)]
                dropped = max(0, len(matched) - MAX_FRAMES)
                out = []
                for row in matched[dropped:]:
                    frame = frames.get(row[0])
                    if frame is None:
                        frame = frames[row[0]] = event_frame(row[0], row[6])
                    out.append((row[0], frame))
                hit = shared[subscriber.key] = (out, dropped + skipped)
            subscriber.push(*hit)

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        self.subscribers.clear()
        await self._poller.close()
        self._close_conn()
