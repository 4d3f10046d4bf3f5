"""The dialect interface a front door implements, and the pieces every dialect shares.

A dialect parses its request (``DoorRequest``: the client's body, decoded once), names the adapter endpoint that
means "this provider serves the dialect itself" (``native_endpoint``: such a target gets the body as sent and its
answer and events relayed byte for byte, usage read from the dialect's own final event), and otherwise translates:
request -> unified chat body, unified chat answer -> the dialect's answer, unified chat stream events -> the
dialect's events (``events``), errors -> the dialect's error shape. See docs/front-doors.md.
"""

from __future__ import annotations

import abc
from typing import Any, TypeVar

import msgspec

from gateway._speedups.sse_in_use import SseSplitter
from gateway.http.errors import DialectError, GatewayError, InvalidRequest
from gateway.schema.common import Usage, is_not_utf8, not_utf8, unreadable, validation_error

_decode = msgspec.json.decode
_encode = msgspec.json.encode
_convert = msgspec.convert
T = TypeVar("T")


class DoorRequest:
    """A dialect request: the decoded ``doc`` of the client's body, what the pipeline reads (``model``,
    ``stream``) and, made once on the first translated attempt, the unified chat body (``chat``)."""

    __slots__ = ("doc", "model", "stream", "chat", "extra", "capped")

    def __init__(self, doc: dict[str, Any], model: str | None, stream: bool) -> None:
        self.doc = doc
        self.model = model
        self.stream = stream
        self.chat: tuple[bytes, Any] | None = None
        #: what a dialect keeps per request (the Responses API's earlier turns)
        self.extra: Any = None
        #: the translation cut the output limit to the model's maximum: ``b"<asked>-><maximum>"`` (the value of
        #: ``x-gateway-max-tokens-capped`` on a translated answer)
        self.capped: bytes | None = None


def decode_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; anything else is a 400."""
    try:
        doc = _decode(body)
    except (UnicodeDecodeError, RecursionError) as exc:
        raise unreadable(exc) from None
    except msgspec.DecodeError as exc:
        if is_not_utf8(exc):
            raise not_utf8() from None
        raise InvalidRequest(f"the request body is not valid JSON: {exc}", param="body") from None
    if not isinstance(doc, dict):
        raise InvalidRequest("the request body must be a JSON object", param="body")
    return doc


def conform(doc: dict[str, Any], shape: type[T]) -> T:
    """``doc`` checked against a dialect's request shape (gateway/schema/messages.py, responses.py): a 400 naming
    the first field that does not fit. Every request is, forwarded or translated."""
    try:
        return _convert(doc, shape)
    except msgspec.ValidationError as exc:
        raise validation_error(exc) from None


def require(doc: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = doc.get(name)
    if value is None:
        raise InvalidRequest(f"{name} is required", param=name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InvalidRequest(f"{name} must be {what}", param=name)
    return value


def optional(doc: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = doc.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and bool not in (
            kind if isinstance(kind, tuple) else (kind,))):
        raise InvalidRequest(f"{name} must be {what}", param=name)
    return value


def chat_events(data: bytes) -> list[dict[str, Any]]:
    """The decoded ``data:`` documents of encoded unified SSE events (one or several joined)."""
    out = []
    for block in data.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload and payload != b"[DONE]":
                    doc = _decode(payload)
                    if isinstance(doc, dict):
                        out.append(doc)
    return out


class DialectEvents(abc.ABC):
    """One translated stream: unified chat chunk documents in, the dialect's encoded SSE events out."""

    @abc.abstractmethod
    def chunk(self, doc: dict[str, Any], out: list[bytes]) -> None:
        """Append the dialect events one unified chunk makes."""

    @abc.abstractmethod
    def end(self, usage: Usage | None, out: list[bytes]) -> None:
        """Append the events that close the stream."""

    @abc.abstractmethod
    def error(self, error: GatewayError) -> bytes:
        """An in-stream error event."""


class TranslatedStream:
    """A unified stream transformer wrapped so its events leave in the dialect (``events``); usage and a held
    in-band error are the inner transformer's."""

    __slots__ = ("inner", "events")

    def __init__(self, inner: Any, events: DialectEvents) -> None:
        self.inner = inner
        self.events = events

    @property
    def usage(self) -> Usage | None:
        usage: Usage | None = self.inner.usage
        return usage

    @property
    def held_error(self) -> GatewayError | None:
        return getattr(self.inner, "held_error", None)

    def translate(self, chunks: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        chunk = self.events.chunk
        for data in chunks:
            for doc in chat_events(data):
                chunk(doc, out)
        return out

    def feed(self, chunk: bytes) -> list[bytes]:
        return self.translate(self.inner.feed(chunk))

    def close(self) -> list[bytes]:
        out = self.translate(self.inner.close())
        self.events.end(self.inner.usage, out)
        return out


class NativeStream:
    """A forwarded dialect stream: every upstream read is relayed as it came; the events are split only to read
    the usage (``usage_of``) and to turn an error event met before anything was sent into a status."""

    __slots__ = ("splitter", "dialect", "provider", "usage", "sent", "parts", "source")

    def __init__(self, dialect: Dialect, provider: str, source: Any = None) -> None:
        #: turns the provider's wire into the dialect's SSE first (``ProviderAdapter.forward_decoder``), if needed
        self.source = source
        self.splitter = SseSplitter()
        self.dialect = dialect
        self.provider = provider
        self.usage: Usage | None = None
        self.sent = False
        #: usage figures collected from the events (a dialect may report input and output in different events)
        self.parts: dict[str, int] = {}

    def feed(self, chunk: bytes) -> list[bytes]:
        dialect = self.dialect
        if self.source is not None:
            chunk = b"".join(self.source.feed(chunk))
            if not chunk:
                return []
        for name, data in self.splitter.feed(chunk):
            found = dialect.native_event(name, data, self)
            if found is not None and not self.sent:
                raise found
        self.sent = True
        return [chunk]

    def close(self) -> list[bytes]:
        return []


class Dialect(abc.ABC):
    """A front door's wire format (see the module docstring)."""

    #: the record's endpoint name (metrics, logs)
    name: str = ""
    #: the adapter endpoint of providers that serve the dialect themselves
    native_endpoint: str = ""
    #: the upstream path of a forwarded request, under the provider's base
    native_path: str = ""
    #: client headers sent along on a forwarded request
    native_headers: tuple[str, ...] = ()

    @abc.abstractmethod
    def parse(self, body: bytes) -> DoorRequest:
        """The checked request (a 400 naming the field for a bad one)."""

    @abc.abstractmethod
    def to_chat(self, request: DoorRequest) -> dict[str, Any]:
        """The unified chat body for a provider that does not serve the dialect."""

    @abc.abstractmethod
    def answer(self, request: DoorRequest, chat: bytes) -> bytes:
        """A unified chat answer as the dialect's answer."""

    @abc.abstractmethod
    def events(self, request: DoorRequest) -> DialectEvents:
        """The translator of one unified chat stream."""

    @abc.abstractmethod
    def native_usage(self, doc: dict[str, Any]) -> Usage | None:
        """The usage a forwarded answer (``doc``, decoded) reports."""

    @abc.abstractmethod
    def native_event(self, name: bytes | None, data: bytes, stream: NativeStream) -> GatewayError | None:
        """Read one forwarded event: set ``stream.usage`` from the final one; an error event as a GatewayError."""

    @abc.abstractmethod
    def stream_error(self, error: GatewayError) -> bytes:
        """An in-stream error event of a forwarded stream (a translated one asks its ``DialectEvents``)."""

    def estimate(self, request: DoorRequest) -> bytes | None:
        """An answer the gateway works out itself for a provider that does not serve the dialect (a token count),
        or None: the request is translated and sent."""
        return None

    def error_body(self, error: GatewayError) -> bytes:
        """A whole-answer error in the dialect's shape (the unified envelope unless a dialect says otherwise)."""
        return error.body()

    def error_status(self, error: GatewayError) -> int:
        return error.status

    async def prepare(self, request: DoorRequest, ctx: Any, store: Any) -> None:  # noqa: B027 - optional hook
        """Load what a translated request needs before its first attempt (stored conversation state)."""

    async def answered(self, request: DoorRequest, ctx: Any, store: Any, answer: bytes) -> None:  # noqa: B027
        """Keep what a translated answer leaves behind (a stored response)."""


def dialect_error(error: GatewayError, dialect: Dialect) -> DialectError:
    """``error`` as ``dialect`` writes errors: its status and its error shape."""
    return DialectError(error, dialect.error_status(error), dialect.error_body(error))


def usage_of(doc: Any, prompt: str, completion: str) -> Usage | None:
    """A Usage from a dialect's usage object (``input_tokens`` / ``output_tokens`` style names)."""
    if not isinstance(doc, dict):
        return None
    p = doc.get(prompt)
    c = doc.get(completion)
    if not isinstance(p, int) and not isinstance(c, int):
        return None
    p = p if isinstance(p, int) else 0
    c = c if isinstance(c, int) else 0
    return Usage(p, c, p + c)


def stream_with_usage(request: DoorRequest, chat: dict[str, Any]) -> dict[str, Any]:
    """``chat`` asking for a stream that ends with its usage when the door's request streams (the dialect's final
    event carries the usage)."""
    if request.stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def first_choice(chat: bytes) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A unified chat answer's document, its first choice and that choice's message (empty when absent)."""
    doc = decode_object(chat)
    choice = (doc.get("choices") or [{}])[0]
    return doc, choice, choice.get("message") or {}


def chat_usage(doc: Any) -> tuple[int, int]:
    """``(prompt_tokens, completion_tokens)`` of a unified usage object."""
    if isinstance(doc, Usage):
        return doc.prompt_tokens, doc.completion_tokens
    if isinstance(doc, dict):
        return int(doc.get("prompt_tokens") or 0), int(doc.get("completion_tokens") or 0)
    return 0, 0


def encode(doc: Any) -> bytes:
    return _encode(doc)
