"""Mock plumbing shared by the provider modules: the request object, scripted scenarios and response writers.

Scenarios script a mock "target": ``POST /_mock/scenarios/{id}`` with ``{"steps": [step, ...]}`` and send requests
under ``/s/{id}/...`` (e.g. custom_host ``http://127.0.0.1:9797/s/flaky/v1``). Each step applies to ``times``
requests (default 1; the last step repeats forever). A step may hold:

- ``status`` (int, default 200): answer with this status and the provider's own error format;
- ``message`` (str): the error message; ``error_type`` (str): the provider's error type/code;
- ``delay_ms`` (int): wait before answering; ``retry_after`` (str) / ``retry_after_ms`` (str): headers to send;
- ``html`` (bool): answer 200 with an HTML page (a malformed upstream answer);
- ``chunks`` (int): number of content chunks in a stream; ``chunk_delay_ms`` (int): wait between chunks;
- ``stream_error`` ("first" | "middle" | "burst" | "cut"): an in-band error as the first event, one midway, one
  written together with the first content events, or a connection cut midway;
- ``reply`` (str): the assistant text to answer with; ``tool_call`` (bool): answer with a tool call;
  ``tool_name`` (str): the tool to call when the request leaves the choice to the model (default: the first tool).
  anthropic and cloudA also call a tool whenever the request forces one (``tool_choice``), with an input made from
  the tool's schema (``schema_sample``).
- ``filter_annotations`` (bool, cloudB): stream like the asynchronous content filter, with an annotation chunk (empty
  ``id`` / ``object``, a choice with ``content_filter_offsets`` and no ``delta``) before ``[DONE]``.
- ``no_usage`` (bool): vendorA chat and completions answer without ``usage`` and ignore
  ``stream_options.include_usage`` (as some vendorA-compatible servers do).
- ``spaced_json`` (bool): write JSON answers and SSE events as Python's ``json`` module does, with a space after
  every ``:`` and ``,`` (as most Python servers do).
- WebSocket sessions (``realtime``, ``responses_ws``; one step per session): ``status`` >= 400 refuses the upgrade
  with that HTTP status and the provider's error body; ``delay_ms`` waits before each answer to ``response.create``;
  ``close_code`` (int) closes the session with that code, midway through the first response (``close_at``
  ``"middle"``, the default) or right after it opens (``"open"``); ``oversized_bytes`` (int) makes the first
  delta's frame at least that large; ``binary_frames`` (bool) sends every server event as a binary frame;
  ``cached_tokens`` (int) reports that many cached input tokens in each response's usage.

``GET /_mock/scenarios/{id}`` answers ``{"calls": n, "requests": [{method, path, query, headers, body, completed,
aborted}]}`` (the last
100 requests, body as text); ``DELETE`` forgets the scenario.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
from typing import Any, Awaitable, Callable

import msgspec

from gateway_mock.asgi import Send

_encode = msgspec.json.encode
DEFAULT_REPLY = (
    "Hello from the gateway mock upstream: this deterministic reply has exactly twenty words, so every stream has "
    "twenty content chunks."
)


class Step(msgspec.Struct, omit_defaults=True):
    times: int = 1
    status: int = 200
    message: str | None = None
    error_type: str | None = None
    delay_ms: int = 0
    retry_after: str | None = None
    retry_after_ms: str | None = None
    html: bool = False
    chunks: int | None = None
    chunk_delay_ms: int = 0
    stream_error: str | None = None
    reply: str | None = None
    tool_call: bool = False
    tool_name: str | None = None
    filter_annotations: bool = False
    no_usage: bool = False
    spaced_json: bool = False
    close_code: int | None = None
    close_at: str = "middle"
    oversized_bytes: int = 0
    binary_frames: bool = False
    cached_tokens: int = 0


class Scenario(msgspec.Struct):
    steps: list[Step] = msgspec.field(default_factory=lambda: [Step()])
    calls: int = 0
    requests: list[dict[str, Any]] = msgspec.field(default_factory=list)

    def next_step(self) -> Step:
        index = self.calls
        self.calls += 1
        for step in self.steps:
            if index < step.times:
                return step
            index -= step.times
        return self.steps[-1]


class MockState:
    """Everything one mock app remembers between requests (scenarios, stored files, jobs, service accounts...).

    It lives on the app (``MockApp.state``) and reaches handlers as ``req.state``: a new app starts empty.
    """

    def __init__(self) -> None:
        self.scenarios: dict[str, Scenario] = {}
        #: vendorA files: id -> file object, and id -> content
        self.files: dict[str, dict] = {}
        self.file_content: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.fine_tuning_jobs: dict[str, dict] = {}
        self.fine_tuning_events: dict[str, list[dict]] = {}
        #: vendorA stored responses and their input items
        self.responses: dict[str, dict] = {}
        self.response_input_items: dict[str, list[dict]] = {}
        #: cloudC service accounts: email -> (RSA public key, token URI); the tokens issued, and how many per email
        self.service_accounts: dict[str, tuple[Any, str]] = {}
        self.issued_tokens: set[str] = set()
        self.issued_count: dict[str, int] = {}


DEFAULT_STEP = Step()


def _empty_match() -> re.Match[str]:
    match = re.match("", "")
    assert match is not None
    return match


_NO_MATCH = _empty_match()


class MockRequest:
    __slots__ = ("method", "path", "query", "headers", "body", "step", "match", "_json", "disconnected", "raw_path",
                 "state")

    def __init__(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, step: Step,
                 state: MockState | None = None) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.step = step
        #: the route's match (an empty match until a route is found)
        self.match: re.Match[str] = _NO_MATCH
        self._json: Any = None
        #: set by the app when the client goes away; stream writers stop at the next part
        self.disconnected = False
        #: the path exactly as it came on the wire (percent-encoding kept, scenario prefix included)
        self.raw_path: bytes = path.encode()
        #: what the serving app remembers (a fresh, empty one when none is given)
        self.state = state if state is not None else MockState()

    def json(self) -> Any:
        if self._json is None:
            self._json = msgspec.json.decode(self.body) if self.body else {}
        return self._json

    def reply_text(self) -> str:
        return self.step.reply or DEFAULT_REPLY

    def reply_words(self) -> list[str]:
        """The reply split into stream pieces (``chunks`` of them when the step says so)."""
        words = self.reply_text().split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        want = self.step.chunks
        if want is None or want == len(pieces):
            return pieces
        if want <= 0:
            return []
        return [pieces[i % len(pieces)] for i in range(want)]


Handler = Callable[[MockRequest, Send], Awaitable[None]]


async def respond(send: Send, status: int, body: bytes, content_type: bytes = b"application/json",
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    all_headers = [(b"content-type", content_type)]
    if headers:
        all_headers.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


def encode_json(doc: Any) -> bytes:
    """A JSON document as the current request's step writes them (compact, or ``spaced_json``)."""
    req = _current.get()
    if req is not None and req.step.spaced_json:
        return json.dumps(msgspec.to_builtins(doc), ensure_ascii=False).encode()
    return _encode(doc)


async def respond_json(send: Send, status: int, doc: Any, headers: list | None = None) -> None:
    await respond(send, status, encode_json(doc), b"application/json", headers)


async def start_stream(send: Send, content_type: bytes = b"text/event-stream") -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", content_type), (b"cache-control", b"no-cache")]})


class ClientGone(Exception):
    """The client disconnected while the mock was still streaming."""


_current: contextvars.ContextVar[MockRequest | None] = contextvars.ContextVar("mock_request", default=None)


async def stream_part(send: Send, data: bytes, step: Step | None = None) -> None:
    if step is not None and step.chunk_delay_ms:
        await asyncio.sleep(step.chunk_delay_ms / 1000)
    req = _current.get()
    if req is not None and req.disconnected:
        raise ClientGone()
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def end_stream(send: Send, data: bytes = b"") -> None:
    await send({"type": "http.response.body", "body": data, "more_body": False})


def sse(doc: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + encode_json(doc) + b"\n\n"


def retry_headers(step: Step) -> list[tuple[bytes, bytes]]:
    headers = []
    if step.retry_after is not None:
        headers.append((b"retry-after", step.retry_after.encode()))
    if step.retry_after_ms is not None:
        headers.append((b"retry-after-ms", step.retry_after_ms.encode()))
    return headers


def count_tokens(text: str) -> int:
    """A stable, cheap token estimate (about four characters a token)."""
    return max(1, (len(text) + 3) // 4)
