"""One client's JSON-RPC request sent on to an agent and its answer relayed back: a JSON answer whole (after
``finish``: output guardrails, an extended card's rewrite), a stream event by event as each arrives.

The request goes with the client's own id (A2A has no session a gateway shares between clients: every call is its
own HTTP request), so the agent's responses come back with it unchanged. A stream's events are relayed as the
agent framed them (``data`` one JSON-RPC response, an ``error`` event named so); an agent that fails mid-stream
gets the stream ended with an ``error`` event carrying the JSON-RPC error. A client that leaves closes the
request to the agent (``DisconnectWatch``) and the call is recorded with status 499.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from gateway.agents import wire
from gateway.agents.upstream import AgentUpstream, Answer
from gateway.http.disconnect import DisconnectWatch
from gateway.http.respond import JSON_HEADERS, SSE_HEADERS, send_bytes
from gateway.http.types import Receive, Send
from gateway.schema.agent_target import AgentTarget
from gateway.upstream.error_text import bounded, header_secrets, scrub_text

#: what may change a JSON answer before it goes out (the agent's response -> the one sent)
Finish = Callable[[bytes], Awaitable[bytes]]


class Relayed(msgspec.Struct):
    """How a relayed call ended: the HTTP status and bytes sent to the client, the JSON-RPC error code (of the answer,
    or of the stream's last error event), whether it went out as a stream, the task the answer named, and the
    seconds the agent took to its answer (to a stream's first event; None: no answer)."""

    status: int
    bytes_out: int
    error_code: int | None
    #: the JSON-RPC error's message (bounded, the agent's credentials masked)
    error: str | None
    streamed: bool
    task_id: str | None
    upstream_s: float | None
    #: when the request went to the agent (``time.perf_counter``)
    sent_at: float


class _Flight:
    __slots__ = ("target", "sent_at", "answered_s", "streamed", "task_id", "error")

    def __init__(self, target: AgentTarget) -> None:
        self.target = target
        self.error: str | None = None
        self.sent_at = 0.0
        self.answered_s: float | None = None
        self.streamed = False
        self.task_id: str | None = None


class AgentRelay:
    """Sends requests on through ``upstream`` and relays the answers (see the module docstring)."""

    def __init__(self, upstream: AgentUpstream) -> None:
        self.upstream = upstream

    async def relay(self, send: Send, receive: Receive, target: AgentTarget, request: wire.Request, body: bytes,
                    passed: Mapping[str, str], finish: Finish | None) -> Relayed:
        flight = _Flight(target)
        task = asyncio.ensure_future(self._exchange(send, flight, target, request, body, passed, finish))
        watch = DisconnectWatch(receive, task)
        try:
            status, out, code = await task
        except asyncio.CancelledError:
            if not watch.fired():
                raise
            status, out, code = 499, 0, None
        finally:
            watch.stop()
        return Relayed(status, out, code, flight.error, flight.streamed, flight.task_id, flight.answered_s,
                       flight.sent_at)

    async def _exchange(self, send: Send, flight: _Flight, target: AgentTarget, request: wire.Request, body: bytes,
                        passed: Mapping[str, str], finish: Finish | None) -> tuple[int, int, int | None]:
        client_id = wire.id_of(request)
        flight.sent_at = time.perf_counter()
        try:
            answer = await self.upstream.send(target, request.method, body, passed)
        except wire.RpcError as exc:
            data = exc.body(client_id)
            flight.error = exc.message
            await send_bytes(send, exc.status, data)
            return exc.status, len(data), exc.code
        try:
            if answer.streamed:
                return await self._stream(send, flight, answer, client_id)
            flight.answered_s = time.perf_counter() - flight.sent_at
            data = answer.body or b""
            if finish is not None:
                data = await finish(data)
            head = wire.head_of(data)
            code = wire.error_code(head) if head is not None else wire.INTERNAL_ERROR
            if head is not None:
                flight.task_id = wire.task_of_result(head.result)
                flight.error = _said(flight.target, head)
            await send_bytes(send, 200, data, JSON_HEADERS)
            return 200, len(data), code
        finally:
            answer.close()

    @staticmethod
    async def _stream(send: Send, flight: _Flight, answer: Answer, client_id: Any) -> tuple[int, int, int | None]:
        flight.streamed = True
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        out = 0
        code: int | None = None
        try:
            async for name, data, head in answer.events():
                if flight.answered_s is None:
                    flight.answered_s = time.perf_counter() - flight.sent_at
                if head.error is not None:
                    code, flight.error = wire.error_code(head), _said(flight.target, head)
                flight.task_id = flight.task_id or wire.task_of_result(head.result)
                event = wire.sse_event(data, name)
                out += len(event)
                await send({"type": "http.response.body", "body": event, "more_body": True})
        except wire.RpcError as exc:
            event = wire.sse_event(exc.body(client_id), b"error")
            out += len(event)
            code, flight.error = exc.code, exc.message
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return 200, out, code


def _said(target: AgentTarget, head: wire.Head) -> str | None:
    """An error response's message as the record keeps it: bounded, the agent's credentials masked."""
    if not isinstance(head.error, dict):
        return None
    message = head.error.get("message")
    if not isinstance(message, str):
        return None
    return scrub_text(bounded(message, 1024), header_secrets(target.headers))
