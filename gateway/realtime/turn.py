"""One turn of a translated Responses WebSocket session (``translate.py``): the door's answer written to the socket
as the mode's events, or as its ``error`` event; what a turn leaves for a later turn of its socket; and a response
prepared without output (``generate: false``).

Wire facts relied on (the openai SDK 3.57's ``types/responses/responses_server_event.py`` and the WebSocket mode
guide; ``gateway_mock/responses_ws.py`` follows them): the mode's server events are the Responses stream's events,
one JSON text frame each, with ``stream_id`` on every event of a response whose ``response.create`` named one; its
error is ``{"type": "error", "status", "error": {"type", "code", "message", "param"}}`` (``status`` absent and
``sequence_number`` present for an error inside a response's stream). The door's in-band error (its SSE ``error``
event: ``code``, ``message``, ``param``, ``sequence_number`` at the top level) is rewritten into that shape.
``generate: false`` prepares a response without output: it has an id a later turn chains from (the mock answers it
with ``response.created`` and ``response.completed``, empty ``output``, zero usage).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Protocol

import msgspec

from gateway._speedups.sse_in_use import SseSplitter
from gateway.jobs.dispatch import Headers
from gateway.process_ids import TRACE_IDS
from gateway.realtime.budget import CLOSE_CODE as BUDGET_CLOSE_CODE
from gateway.realtime.budget import CLOSE_REASON as BUDGET_CLOSE_REASON
from gateway.realtime.relay import Ending

#: the most of a refusal's body read for its error event
ERROR_BODY_MAX = 64 * 1024
KEY_REFUSED = "gateway key refused"

#: a turn's conversation relative to a stored response: (that response's id or None, the items since)
Conversation = tuple["str | None", list[Any]]


class Session(Protocol):
    """What a turn uses of its session (``translate.TranslatedSession``)."""

    def saw(self, name: bytes | None, data: bytes) -> None: ...

    async def send(self, frame: str) -> None: ...

    def remember(self, response_id: str, conversation: Conversation) -> None: ...

    def end_session(self, ending: Ending) -> None: ...


class _InBand(msgspec.Struct, gc=False):
    code: str | None = None
    message: str | None = None
    param: str | None = None
    sequence_number: int | None = None


class _ErrorBody(msgspec.Struct, gc=False):
    message: str | None = None
    type: str | None = None
    param: str | None = None
    code: str | int | None = None


class _Refusal(msgspec.Struct, gc=False):
    error: _ErrorBody | None = None


#: the events that end a response (with its output)
_ENDS = (b"response.completed", b"response.incomplete")
#: the events that carry the whole response
_WHOLE = (b"response.created", b"response.in_progress", *_ENDS, b"response.failed")


def as_input(output: Any) -> list[dict[str, Any]]:
    """A response's output items as input items of a later turn: its messages as assistant messages, its function
    calls as they are (other items, the provider's own, are left out)."""
    items: list[dict[str, Any]] = []
    for item in output if isinstance(output, list) else ():
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            parts = [{"type": "output_text", "text": part.get("text") or ""} for part in item.get("content") or ()
                     if isinstance(part, dict) and part.get("type") == "output_text"]
            items.append({"role": "assistant", "content": parts})
        elif kind == "function_call":
            items.append({"type": "function_call", "call_id": item.get("call_id"), "name": item.get("name"),
                          "arguments": item.get("arguments")})
    return items


_decode_in_band = msgspec.json.Decoder(_InBand).decode
_decode_refusal = msgspec.json.Decoder(_Refusal).decode
_encode = msgspec.json.encode


def error_event(status: int | None, error_type: str, code: str | None, message: str, param: str | None,
                stream_id: str | None = None, sequence_number: int | None = None) -> str:
    """The mode's ``error`` event (see the module docstring)."""
    doc: dict[str, Any] = {"type": "error"}
    if status is not None:
        doc["status"] = status
    doc["error"] = {"type": error_type, "code": code, "message": message, "param": param}
    if sequence_number is not None:
        doc["sequence_number"] = sequence_number
    if stream_id is not None:
        doc["stream_id"] = stream_id
    return _encode(doc).decode()


class TurnSink:
    """One turn's answer: its SSE events written to the socket as they come, or its refusal as an error event."""

    __slots__ = ("session", "stream_id", "context", "previous", "status", "splitter", "refusal", "refusal_bytes")

    def __init__(self, session: Session, stream_id: str | None, context: Conversation | None) -> None:
        self.session = session
        self.stream_id = stream_id
        #: a ``store: false`` turn's conversation so far, remembered with its output when it ends
        self.context = context
        #: (what the door's events say, what the client asked): the ``previous_response_id`` member of a turn
        #: continued from its socket's memory, whose events name the response the client named
        self.previous: tuple[bytes, bytes] | None = None
        self.status = 0
        self.splitter: Any = None
        self.refusal: list[bytes] = []
        self.refusal_bytes = 0

    async def start(self, status: int, headers: Headers) -> None:
        self.status = status
        content_type = next((value for name, value in headers if name.lower() == b"content-type"), b"")
        if status < 300 and content_type.startswith(b"text/event-stream"):
            self.splitter = SseSplitter()

    async def body(self, data: bytes) -> None:
        splitter = self.splitter
        if splitter is not None:
            for name, event in splitter.feed(data):
                await self._event(name, event)
        elif self.refusal_bytes < ERROR_BODY_MAX:
            self.refusal.append(data[:ERROR_BODY_MAX - self.refusal_bytes])
            self.refusal_bytes += len(data)

    async def end(self) -> None:
        splitter = self.splitter
        if splitter is not None:
            for name, event in splitter.close():
                await self._event(name, event)
            return
        await self._refused()

    async def _event(self, name: bytes | None, data: bytes) -> None:
        session = self.session
        session.saw(name, data)
        if self.previous is not None and name in _WHOLE:
            data = data.replace(*self.previous, 1)
        if self.context is not None and name in _ENDS:
            self._remember(data)
        if name == b"error":
            try:
                doc = _decode_in_band(data)
            except msgspec.DecodeError:
                doc = _InBand(message="the response's stream failed")
            frame = error_event(None, "server_error", doc.code, doc.message or "the response's stream failed",
                                doc.param, self.stream_id, doc.sequence_number)
        elif self.stream_id is not None and data[:1] == b"{" and data[1:2] != b"}":
            frame = '{"stream_id":' + _encode(self.stream_id).decode() + "," + data[1:].decode()
        else:
            frame = data.decode()
        await session.send(frame)

    def _remember(self, data: bytes) -> None:
        try:
            response = msgspec.json.decode(data).get("response") or {}
        except (msgspec.DecodeError, AttributeError):
            return
        context = self.context
        if isinstance(response.get("id"), str) and context is not None:
            self.session.remember(response["id"], (context[0], [*context[1], *as_input(response.get("output"))]))

    async def _refused(self) -> None:
        """A non-2xx answer (or a 2xx one that is not a stream) as one error event; a spent budget or a refused
        key ends the session after it."""
        status = self.status or 502
        body = b"".join(self.refusal)
        try:
            error = _decode_refusal(body).error
        except msgspec.DecodeError:
            error = None
        if error is None:
            message = (f"the gateway answered {status} without a stream" if status < 300 else
                       f"the gateway answered {status}")
            error = _ErrorBody(message=message, type="server_error")
            status = 502 if status < 300 else status
        code = None if error.code is None else str(error.code)
        session = self.session
        with contextlib.suppress(ConnectionError):
            await session.send(error_event(status, error.type or "server_error", code, error.message or "",
                                           error.param, self.stream_id))
        if code == "usage_limit_exceeded":
            session.end_session(Ending(BUDGET_CLOSE_CODE, BUDGET_CLOSE_REASON, "gateway", error.message))
        elif status == 401:
            session.end_session(Ending(BUDGET_CLOSE_CODE, KEY_REFUSED, "gateway", error.message))


def member(previous: str | None) -> bytes:
    """The ``previous_response_id`` member as the door's events write it."""
    return b'"previous_response_id":' + _encode(previous)


def prepared_events(body: dict[str, Any], previous: str | None, stream_id: str | None) -> list[tuple[bytes, bytes]]:
    """The events of a response prepared without output (``generate: false``): created and completed, no output, no
    usage. Nothing is sent to a provider: its input waits in the socket's memory for the turn that continues it."""
    response = {"id": "resp_" + TRACE_IDS.next_hex(), "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "error": None, "incomplete_details": None,
                "instructions": body.get("instructions"), "model": body.get("model"), "output": [],
                "parallel_tool_calls": body.get("parallel_tool_calls", True), "previous_response_id": previous,
                "store": body.get("store", True), "tool_choice": body.get("tool_choice", "auto"),
                "tools": body.get("tools") or [], "metadata": body.get("metadata") or {}, "usage": None}
    created = {"type": "response.created", "sequence_number": 0, "response": dict(response)}
    response.update(status="completed", usage={"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                                               "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                                               "total_tokens": 0})
    completed = {"type": "response.completed", "sequence_number": 1, "response": response}
    out = []
    for name, doc in ((b"response.created", created), (b"response.completed", completed)):
        if stream_id is not None:
            doc["stream_id"] = stream_id
        out.append((name, _encode(doc)))
    return out
