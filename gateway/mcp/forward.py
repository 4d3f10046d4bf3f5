"""One client request sent on to a server and its answer relayed back: the request's id replaced by one of the
gateway's own, the answer streamed or sent whole, and cancellations reaching only the request they name.

**Ids.** A server sees ``gw-<worker>-<n>`` instead of the client's id, and the response gets the client's id back.
Clients of one worker share its session with a handshake-era server, and two clients may use the same id: their
answers and cancellations must never cross. Progress notifications carry the client's own progress token and come
on the request's own stream, so they pass unchanged.

**Answers.** A streamed answer (``text/event-stream``) is relayed event by event when the client accepts a stream,
else the server's response is sent as one JSON answer (its notifications dropped). ``finish`` may change the
response before it goes out (output guardrails, the 2026-07-28 result fields). A client that leaves mid-answer
closes the request to the server (``DisconnectWatch``).

**Cancelling.** While a request runs, this worker knows it by (gateway key, endpoint, the client's id). A
handshake-era client's ``notifications/cancelled`` for that id stops it: a handshake-era server is sent the
cancellation for the gateway's id, every server's request is closed (a 2026-07-28 server's cancellation), and the
client's request is answered with error -32800 "Request cancelled" if it still waits. A cancellation for an id the
key has not in flight on this worker (another key's, or one running on another worker) changes nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from gateway.http.disconnect import DisconnectWatch
from gateway.http.respond import JSON_HEADERS, send_bytes
from gateway.http.types import Receive, Send
from gateway.mcp import wire
from gateway.mcp.target import ServerTarget
from gateway.mcp.upstream import Answer, McpUpstream

REQUEST_CANCELLED = -32800
Finish = Callable[[bytes], Awaitable[bytes]]
#: (gateway key id, endpoint, the client's request id as JSON)
Owner = tuple[str, str, bytes]

_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class _Head(msgspec.Struct):
    id: Any = None
    method: Any = None
    error: Any = None


_head = msgspec.json.Decoder(_Head)


class Relayed(msgspec.Struct):
    """How a relayed request ended: the HTTP status and bytes sent to the client, the JSON-RPC error code (if the
    answer was one), whether it went out as a stream, and the seconds the server took to its response (None: no
    response)."""

    status: int
    bytes_out: int
    error_code: int | None
    streamed: bool
    upstream_s: float | None
    #: when the request went to the server (``time.perf_counter``)
    sent_at: float


class _Flight:
    """A request in flight: its server, the gateway's id for it, the task relaying it, whether the client
    cancelled it, whether its answer's head went out, and when it was sent and answered."""

    __slots__ = ("target", "upstream_id", "task", "cancelled", "started", "sent_at", "answered_s")

    def __init__(self, target: ServerTarget, upstream_id: str) -> None:
        self.target = target
        self.upstream_id = upstream_id
        self.task: asyncio.Future[tuple[int, int, int | None]] | None = None
        self.cancelled = False
        self.started = False
        self.sent_at = 0.0
        self.answered_s: float | None = None


class Forwarder:
    """Sends requests on through ``upstream`` and relays their answers (see the module docstring)."""

    def __init__(self, upstream: McpUpstream) -> None:
        self.upstream = upstream
        self._prefix = f"gw-{os.getpid():x}-"
        self._counter = itertools.count(1)
        self._flights: dict[Owner, _Flight] = {}

    async def relay(self, send: Send, receive: Receive, target: ServerTarget, message: wire.Message,
                    owner: Owner, headers: list[tuple[bytes, bytes]], finish: Finish | None,
                    wants_stream: bool) -> Relayed:
        """Send ``message`` to ``target`` and answer the client (``headers`` go on the answer: a session's
        id)."""
        flight = _Flight(target, f"{self._prefix}{next(self._counter)}")
        client_id = message.id
        sent = msgspec.structs.replace(message, id=flight.upstream_id)
        task = flight.task = asyncio.ensure_future(
            self._exchange(send, flight, sent, client_id, headers, finish, wants_stream))
        self._flights[owner] = flight
        watch = DisconnectWatch(receive, task)
        try:
            status, out, code = await task
        except asyncio.CancelledError:
            if flight.cancelled:
                status, out, code = await _cancelled(send, flight, client_id, headers)
            elif watch.fired():
                status, out, code = 499, 0, None
            else:
                raise
        finally:
            watch.stop()
            if self._flights.get(owner) is flight:
                del self._flights[owner]
        return Relayed(status, out, code, flight.started and wants_stream, flight.answered_s, flight.sent_at)

    async def cancel(self, owner: Owner) -> bool:
        """Stop the request ``owner`` names, if it runs on this worker (see the module docstring)."""
        flight = self._flights.get(owner)
        if flight is None or flight.task is None or flight.task.done():
            return False
        flight.cancelled = True
        if not self.upstream.speaks_modern(flight.target):
            notice = wire.Message(jsonrpc="2.0", method="notifications/cancelled",
                                  params={"requestId": flight.upstream_id, "reason": "cancelled by the client"})
            try:
                answer = await self.upstream.send(flight.target, notice)
                answer.close()
            except wire.RpcError:
                pass
        flight.task.cancel()
        return True

    async def _exchange(self, send: Send, flight: _Flight, message: wire.Message, client_id: Any,
                        headers: list[tuple[bytes, bytes]], finish: Finish | None,
                        wants_stream: bool) -> tuple[int, int, int | None]:
        target = flight.target
        flight.sent_at = time.perf_counter()
        try:
            answer = await self.upstream.send(target, message)
        except wire.RpcError as exc:
            data = exc.body(client_id)
            flight.started = True
            await send_answer(send, exc.status, data, headers)
            return exc.status, len(data), exc.code
        try:
            if answer.streamed and wants_stream:
                outcome = await self._stream(send, flight, answer, client_id, headers, finish)
            else:
                try:
                    reply = await _final(target, answer, flight.upstream_id)
                    flight.answered_s = time.perf_counter() - flight.sent_at
                    reply = _with_id(reply, client_id)
                    if finish is not None:
                        reply = await finish(reply)
                except wire.RpcError as exc:
                    reply = exc.body(client_id)
                code = _error_code(reply)
                status = wire.ERROR_STATUS.get(code, 200) if code is not None else 200
                flight.started = True
                await send_answer(send, status, reply, headers)
                outcome = status, len(reply), code
            await answer.drain()  # the client has its answer: the stream's end read, the connection kept
            return outcome
        finally:
            answer.close()

    @staticmethod
    async def _stream(send: Send, flight: _Flight, answer: Answer, client_id: Any,
                      headers: list[tuple[bytes, bytes]], finish: Finish | None) -> tuple[int, int, int | None]:
        flight.started = True
        await send({"type": "http.response.start", "status": 200, "headers": _SSE + headers})
        out = 0
        code: int | None = None
        try:
            async for data in answer.messages():
                last = _is_response_to(flight.target, data, flight.upstream_id)
                if last:
                    flight.answered_s = time.perf_counter() - flight.sent_at
                    data = _with_id(data, client_id)
                    if finish is not None:
                        data = await finish(data)
                    code = _error_code(data)
                event = wire.sse_event(data)
                out += len(event)
                await send({"type": "http.response.body", "body": event, "more_body": True})
                if last:
                    break
            else:
                raise _ended(flight.target)
        except wire.RpcError as exc:
            event = wire.sse_event(exc.body(client_id))
            out += len(event)
            code = exc.code
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return 200, out, code


async def _cancelled(send: Send, flight: _Flight, client_id: Any, headers: list[tuple[bytes, bytes]]
                     ) -> tuple[int, int, int | None]:
    """Answer a request its client cancelled (the error event ending a started stream, else the JSON error)."""
    data = wire.error_body(client_id, REQUEST_CANCELLED, "Request cancelled")
    if flight.started:
        event = wire.sse_event(data)
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return 200, len(event), REQUEST_CANCELLED
    await send_answer(send, 200, data, headers)
    return 200, len(data), REQUEST_CANCELLED


async def _final(target: ServerTarget, answer: Answer, upstream_id: str) -> bytes:
    """The server's response to ``upstream_id`` (its notifications dropped: the client takes no stream)."""
    async for data in answer.messages():
        if _is_response_to(target, data, upstream_id):
            return data
    raise _ended(target)


def _ended(target: ServerTarget) -> wire.RpcError:
    return wire.RpcError(wire.CONNECTION_CLOSED, f"MCP server '{target.slug}' ended its answer without a response")


def _is_response_to(target: ServerTarget, data: bytes, id: str) -> bool:
    try:
        head = _head.decode(data)
    except (msgspec.DecodeError, RecursionError):
        raise wire.RpcError(wire.INTERNAL_ERROR, f"MCP server '{target.slug}' sent a message that is not "
                                                 "JSON-RPC") from None
    return head.method is None and head.id == id


def _with_id(data: bytes, client_id: Any) -> bytes:
    """The response ``data`` with the client's id in place of the gateway's."""
    message = wire.decode(data)
    return wire.encode(msgspec.structs.replace(message, id=client_id))


def _error_code(data: bytes) -> int | None:
    try:
        error = _head.decode(data).error
    except (msgspec.DecodeError, RecursionError):
        return wire.INTERNAL_ERROR
    if isinstance(error, dict):
        code = error.get("code")
        return code if isinstance(code, int) else wire.INTERNAL_ERROR
    return None


def owner_of(key_id: str, endpoint: str, request_id: Any) -> Owner:
    """How the in-flight requests know a client's request (or the one its cancellation names)."""
    return (key_id, endpoint, msgspec.json.encode(request_id))


async def send_answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """One whole answer of the MCP endpoints: ``body`` (a JSON-RPC message, or empty: 202, a DELETE's 200) with
    ``headers`` (a session's id, a challenge), JSON's content type when there is a body."""
    extra = headers or []
    await send_bytes(send, status, body, [*JSON_HEADERS, *extra] if body else extra)
