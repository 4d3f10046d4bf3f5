"""cloudA ConverseStream event-stream frames -> unified ``chat.completion.chunk`` SSE events, as they arrive.

Facts relied on (AWS's public Bedrock Runtime API reference, ConverseStream output): each event message carries one
member, named by ``:event-type``, with a JSON payload: ``messageStart {role}``, ``contentBlockStart
{contentBlockIndex, start: {toolUse: {toolUseId, name}}}``, ``contentBlockDelta {contentBlockIndex, delta: {text} |
{toolUse: {input}} | {reasoningContent: {text} | {signature} | {redactedContent}}}``, ``contentBlockStop
{contentBlockIndex}``, ``messageStop {stopReason}``, ``metadata {usage, metrics}``; payloads may carry extra members
(such as a ``p`` padding string) that are ignored. In-band failures are ``exception`` messages
(``:exception-type`` ``internalServerException``, ``modelStreamErrorException``, ``validationException``,
``throttlingException``, ``serviceUnavailableException``) with ``{message}`` payloads.

Every chunk carries one generated id and ``"system_fingerprint": null``; tool calls are numbered in the order their
blocks start; with ``response_format`` the output tool's input deltas go out as ``content`` deltas, text deltas are
left out, and a stream whose only call was the output tool finishes with ``stop`` (``structured_output``); the finish
chunk is
sent at ``messageStop``; a usage chunk (empty ``choices``) follows ``metadata`` when ``stream_options.include_usage``
is set. The role chunk ``messageStart`` makes is held back until the first content, so an exception right after
``messageStart`` is still the stream's first event (a real status). When one read holds events and then an
exception, the events are returned and the error is held (``base.InBandErrorHolder``): the pipeline sees it in
``held_error``, and the next ``feed`` / ``close`` raises it. A stream that ends mid-frame or before ``messageStop``
is a 502 naming the provider.
"""

from __future__ import annotations

import time

import msgspec

from gateway._speedups.sse_in_use import encode_event
from gateway.http.errors import GatewayError
from gateway.providers.base import InBandErrorHolder, malformed, upstream_error
from gateway.providers.cloudA import converse
from gateway.providers.cloudA.eventstream import EventStreamDecoder, EventStreamError, Message
from gateway.schema.common import Usage

_encode = msgspec.json.encode


class _ToolStart(msgspec.Struct):
    toolUseId: str = ""
    name: str = ""


class _Start(msgspec.Struct):
    toolUse: _ToolStart | None = None


class _ToolDelta(msgspec.Struct):
    input: str = ""


class _ReasoningDelta(msgspec.Struct):
    text: str | None = None


class _Delta(msgspec.Struct):
    text: str | None = None
    toolUse: _ToolDelta | None = None
    reasoningContent: _ReasoningDelta | None = None


class _Event(msgspec.Struct):
    """The union of the fields of every ConverseStream event payload (each event sets its own)."""

    contentBlockIndex: int = 0
    start: _Start | None = None
    delta: _Delta | None = None
    stopReason: str | None = None
    usage: converse.TokenUsage | None = None


_event = msgspec.json.Decoder(_Event)


class _FunctionStart(msgspec.Struct):
    name: str
    arguments: str = ""


class _CallStart(msgspec.Struct):
    index: int
    id: str
    function: _FunctionStart
    type: str = "function"


class _FunctionPart(msgspec.Struct):
    arguments: str


class _CallPart(msgspec.Struct):
    index: int
    function: _FunctionPart


class _UsageChunk(msgspec.Struct):
    id: str
    created: int
    model: str
    usage: converse.OutUsage
    choices: list = msgspec.field(default_factory=list)
    object: str = "chat.completion.chunk"
    system_fingerprint: None = None


class ConverseStream(InBandErrorHolder):
    """One stream's transformer: ``feed`` raw upstream bytes, get encoded SSE events."""

    __slots__ = ("provider", "model", "include_usage", "reasoning", "usage", "id", "created", "decoder",
                 "tools", "stopped", "role_pending", "_head", "_encode_event", "output_tool", "outputs")

    def __init__(self, provider: str, model: str, include_usage: bool, reasoning: bool,
                 output_tool: str | None = None) -> None:
        self.provider = provider
        self.model = model
        self.include_usage = include_usage
        self.reasoning = reasoning
        self.usage: Usage | None = None
        self.id = converse.new_id()
        self.created = int(time.time())
        self.decoder = EventStreamDecoder()
        self.tools: dict[int, int] = {}
        self.stopped = False
        self.held_error: GatewayError | None = None
        self.role_pending = False
        #: the tool that carries response_format, and its content block indexes: index -> whether input was sent
        self.output_tool = output_tool
        self.outputs: dict[int, bool] = {}
        self._head = (b'{"id":"' + self.id.encode() + b'","object":"chat.completion.chunk","created":'
                      + str(self.created).encode() + b',"model":' + _encode(model)
                      + b',"system_fingerprint":null,"choices":[{"index":0,"delta":')
        self._encode_event = encode_event

    def _chunk(self, delta: bytes, finish: str | None = None) -> bytes:
        tail = b',"logprobs":null,"finish_reason":null}]}' if finish is None else (
            b',"logprobs":null,"finish_reason":"' + finish.encode() + b'"}]}')
        return self._encode_event(self._head + delta + tail)

    def _push(self, out: list[bytes], event: bytes) -> None:
        """Append an event, preceded by the held-back role chunk when it is the first."""
        if self.role_pending:
            self.role_pending = False
            out.append(self._chunk(b'{"role":"assistant","content":""}'))
        out.append(event)

    def feed(self, chunk: bytes) -> list[bytes]:
        self.raise_held()
        try:
            messages = self.decoder.feed(chunk)
        except EventStreamError as exc:
            raise malformed(self.provider, f"bad event stream: {exc}") from None
        out: list[bytes] = []
        try:
            for message in messages:
                self._handle(message, out)
        except GatewayError as error:
            # events decoded before the failure in the same read go out first; the failure follows them
            return self.hold(error, out)
        return out

    def close(self) -> list[bytes]:
        self.raise_held()
        if self.decoder.pending:
            raise malformed(self.provider, f"stream ended inside an event ({self.decoder.pending} bytes left)")
        if not self.stopped:
            raise malformed(self.provider, "stream ended before messageStop")
        return []

    def _handle(self, message: Message, out: list[bytes]) -> None:
        kind = message.message_type
        if kind == "exception":
            raise converse.exception_error(self.provider, message.exception_type or "internalServerException",
                                           message.payload)
        if kind == "error":
            code = str(message.headers.get(":error-code") or "InternalServerException")
            text = str(message.headers.get(":error-message") or f"{self.provider} stream failed with {code}")
            error_type = converse.error_type_name(code)
            raise upstream_error(self.provider, converse.ERROR_STATUSES.get(error_type, 500), b"", message=text,
                                 type_=error_type)
        name = message.event_type
        try:
            event = _event.decode(message.payload) if message.payload else _Event()
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise malformed(self.provider, f"{name} event payload is not JSON", message.payload) from None
        if name == "contentBlockDelta":
            self._delta(event, out)
        elif name == "messageStart":
            self.role_pending = True
        elif name == "contentBlockStart":
            tool = event.start.toolUse if event.start is not None else None
            if tool is not None and self.output_tool is not None and tool.name == self.output_tool:
                self.outputs[event.contentBlockIndex] = False
            elif tool is not None:
                index = self.tools[event.contentBlockIndex] = len(self.tools)
                delta = _encode([_CallStart(index, tool.toolUseId, _FunctionStart(tool.name))])
                self._push(out, self._chunk(b'{"tool_calls":' + delta + b"}"))
        elif name == "contentBlockStop":
            if self.outputs.get(event.contentBlockIndex) is False:
                self.outputs[event.contentBlockIndex] = True  # the output tool called without input
                self._push(out, self._chunk(b'{"content":"{}"}'))
        elif name == "messageStop":
            self.stopped = True
            reason = converse.finish_reason(event.stopReason) or "stop"
            if reason == "tool_calls" and self.outputs and not self.tools:
                reason = "stop"  # only the output tool was called
            self._push(out, self._chunk(b"{}", reason))
        elif name == "metadata" and event.usage is not None:
            out_usage, self.usage = converse.usage_of(event.usage)
            if self.include_usage:
                self._push(out, self._encode_event(_encode(_UsageChunk(self.id, self.created, self.model, out_usage))))

    def _delta(self, event: _Event, out: list[bytes]) -> None:
        delta = event.delta
        if delta is None:
            return
        if delta.text is not None:
            if self.output_tool is None:
                self._push(out, self._chunk(b'{"content":' + _encode(delta.text) + b"}"))
        elif delta.toolUse is not None:
            if event.contentBlockIndex in self.outputs:
                if delta.toolUse.input:
                    self.outputs[event.contentBlockIndex] = True
                    self._push(out, self._chunk(b'{"content":' + _encode(delta.toolUse.input) + b"}"))
                return
            index = self.tools.get(event.contentBlockIndex)
            if index is None:
                index = self.tools[event.contentBlockIndex] = len(self.tools)
            part = _encode([_CallPart(index, _FunctionPart(delta.toolUse.input))])
            self._push(out, self._chunk(b'{"tool_calls":' + part + b"}"))
        elif delta.reasoningContent is not None and self.reasoning and delta.reasoningContent.text:
            self._push(out, self._chunk(b'{"reasoning_content":' + _encode(delta.reasoningContent.text) + b"}"))
