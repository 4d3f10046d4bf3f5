"""``GET /v1/logs/stream``: request logs as server-sent events while they are written, from every worker.

The same key rules (``logscope``) and filters as ``GET /v1/logs`` (``trace_id``, ``status`` or ``2xx``..``5xx``,
``provider``, ``model``, ``from``, ``to``, ``workspace``), plus ``backlog`` (0..100, default 0): the newest matching
records to send first, oldest first; any other query name (``limit`` and ``after`` too: a stream is not paged) or a
``provider`` that is no provider's name is a 400 naming it. Then each new matching record is one ``event: log``
whose ``id:`` is the record's id and whose data is the ``/v1/logs`` item; ``event: skipped`` (``{"skipped": n}``)
says how many records this connection missed because it fell behind; a ``: keep-alive`` comment goes out every
``HEARTBEAT_S`` of silence. Before each chunk the stream checks that its key still may read logs (a dict lookup; a
store read after the records changed): a revoked key's stream ends there and gets nothing more.

One poller per worker feeds every connection (``gateway.observability.logtail``); a connection whose socket takes
more than ``SEND_TIMEOUT_S`` to accept a chunk is closed, so a stuck console holds nothing. When the worker is
asked to stop, every stream ends at once (consoles reconnect to another worker or after the restart), so open
consoles never hold up a graceful shutdown.
"""

from __future__ import annotations

import asyncio
from typing import Mapping

import msgspec

from gateway.api.admin import provider_query
from gateway.api.logs import QUERY as LOG_QUERY
from gateway.api.logs import parse_filter
from gateway.api.logscope import log_scope
from gateway.controlplane.keys import KeyStore
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.http.respond import end_stream, send_chunk, start_stream
from gateway.http.shutdown import StopNotice
from gateway.http.types import Receive, Scope, Send
from gateway.observability.logbackend import LogReader
from gateway.observability.logstore import LogFilter
from gateway.observability.logtail import LogTail, Subscriber, event_frame, row_matcher
from gateway.waiting import wait_event, within

MAX_BACKLOG = 100
#: the query names of the stream: the filters of GET /v1/logs and ``backlog`` (``limit`` and ``after``, which only
#: page a list, are refused by name); any other name is a 400 naming it
QUERY = (*LOG_QUERY, "backlog")
HEARTBEAT_S = 15.0
SEND_TIMEOUT_S = 10.0
_OPENING = b"retry: 2000\n: connected\n\n"
_KEEP_ALIVE = b": keep-alive\n\n"


def _backlog(query: Mapping[str, str]) -> int:
    backlog = 0
    for name, raw in query.items():
        if name in ("limit", "after"):
            raise InvalidRequest(f"{name} is not a stream parameter: use backlog (0..{MAX_BACKLOG})", param=name)
        if name == "backlog":
            try:
                backlog = int(raw.strip())
            except ValueError:
                raise InvalidRequest(f"backlog must be an integer, got {raw!r}", param="backlog") from None
            if not 0 <= backlog <= MAX_BACKLOG:
                raise InvalidRequest(f"backlog must be between 0 and {MAX_BACKLOG}, got {backlog}",
                                     param="backlog")
    return backlog


class LogStreamEndpoint:
    def __init__(self, keys: KeyStore, logs: LogReader) -> None:
        """``logs``: the worker's request-log store (embedded or shared), which this route follows."""
        self.keys = keys
        self.logs = logs
        self.tail: LogTail | None = None
        self.stop = StopNotice()

    async def start(self) -> None:
        """Nothing to start: the tail starts with the first stream."""

    async def close(self) -> None:
        """Stop the worker's tail (its poller or listening connection) with the worker, before the log store."""
        if self.tail is not None:
            await self.tail.close()

    def _tail(self) -> LogTail:
        """The worker's one live tail of the store (made by the first stream)."""
        if self.tail is None:
            self.tail = self.logs.tail()
        return self.tail

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reader = await log_scope(self.keys, scope, QUERY)
        backlog = _backlog(reader.query)
        provider_query(reader.query, mcp=True)
        flt = parse_filter(reader.query)
        tail = self._tail()
        key = (reader.workspace, reader.every_workspace, flt.trace_id, flt.status, flt.status_class, flt.provider,
               flt.model, flt.since, flt.until)
        subscriber = Subscriber(key, row_matcher(flt, reader.workspace, reader.every_workspace))
        await tail.subscribe(subscriber)
        watcher: asyncio.Future | None = None
        try:
            opening = _OPENING
            if backlog:
                opening += await self._backlog_frames(reader.workspace, reader.every_workspace, flt, backlog,
                                                      subscriber)
            await start_stream(send)
            await send_chunk(send, opening)
            gone = asyncio.Event()
            watcher = asyncio.ensure_future(_watch_disconnect(receive, gone, subscriber))
            stopping = self.stop.event
            waker = asyncio.ensure_future(_wake_on(stopping, subscriber))
            try:
                await self._pump(send, subscriber, gone, stopping, reader.api_key)
            finally:
                waker.cancel()
        finally:
            tail.unsubscribe(subscriber)
            if watcher is not None:
                watcher.cancel()

    async def _backlog_frames(self, workspace: str | None, every_workspace: bool, flt: LogFilter, count: int,
                              subscriber: Subscriber) -> bytes:
        flt = msgspec.structs.replace(flt, limit=count)
        rows, _ = await self.logs.query(workspace, flt, every_workspace)
        if not rows:
            return b""
        subscriber.skip_through(rows[0][0])  # the newest backlog row: live frames start after it
        return b"".join(event_frame(row_id, doc) for row_id, doc in reversed(rows))

    async def _allowed(self, api_key: str) -> bool:
        """Whether the stream's key may still read logs (not revoked, still with ``logs.read``)."""
        try:
            record = await self.keys.lookup(api_key)  # memory first: a store read only after a change
        except GatewayError:  # the store cannot say right now: the next chunk asks again
            return True
        return record is not None and "logs.read" in record.scopes

    async def _pump(self, send: Send, subscriber: Subscriber, gone: asyncio.Event, stopping: asyncio.Event,
                    api_key: str) -> None:
        while not stopping.is_set():
            if await wait_event(subscriber.wake, HEARTBEAT_S):
                subscriber.wake.clear()
                chunk = subscriber.take()
            else:
                chunk = _KEEP_ALIVE
            if gone.is_set():
                return
            if not chunk:
                continue
            if not await self._allowed(api_key):
                break
            try:
                await within(send_chunk(send, chunk), SEND_TIMEOUT_S)
            except (TimeoutError, OSError, RuntimeError):
                return  # a stuck or vanished console: drop it
        try:  # the worker is stopping or the key was revoked: end the response
            await within(end_stream(send), SEND_TIMEOUT_S)
        except (TimeoutError, OSError, RuntimeError):
            pass


async def _wake_on(event: asyncio.Event, subscriber: Subscriber) -> None:
    await event.wait()
    subscriber.wake.set()


async def _watch_disconnect(receive: Receive, gone: asyncio.Event, subscriber: Subscriber) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            subscriber.wake.set()
            return
