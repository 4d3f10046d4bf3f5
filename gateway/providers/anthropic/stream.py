"""Anthropic Messages SSE events -> unified ``chat.completion.chunk`` (or ``text_completion``) SSE events.

Each upstream event is decoded once into a small Struct; each chunk out is one pre-built prefix, one msgspec encode
of the delta and one pre-built suffix (the id, created, model and a null ``system_fingerprint`` never change within
a stream). With ``response_format`` the output tool's ``input_json_delta`` pieces go out as ``content`` deltas, text
blocks are left out, and a stream whose only call was the output tool finishes with ``stop``
(``structured_output``).
"""

from __future__ import annotations

import time

import msgspec

from gateway._speedups.sse_in_use import SseSplitter
from gateway.http.errors import GatewayError
from gateway.providers.anthropic.response import (
    PROVIDER,
    AMessage,
    AUsage,
    Block,
    Tokens,
    finish_reason,
    stream_error,
)
from gateway.providers.base import InBandErrorHolder, malformed, snippet
from gateway.schema.common import Usage

_encode = msgspec.json.encode


class Delta(msgspec.Struct, gc=False):
    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None


class Event(msgspec.Struct, gc=False):
    """Any stream event's data (fields not in an event stay at their defaults)."""

    type: str = ""
    index: int = 0
    delta: Delta | None = None
    content_block: Block | None = None
    message: AMessage | None = None
    usage: AUsage | None = None


_event = msgspec.json.Decoder(Event)
_CHUNK_TAIL = b',"logprobs":null,"finish_reason":null}]}\n\n'


class AnthropicStream(InBandErrorHolder):
    """One stream's state: ids, the tool-call counter, token counts, and whether message_stop was seen.

    ``chat`` picks chat chunks (else text_completion chunks); ``strict`` drops thinking, otherwise thinking,
    signatures and text also go out as ``delta.content_blocks`` entries ``{"index": block, "delta": {...}}``.
    """

    __slots__ = ("splitter", "chat", "strict", "include_usage", "model", "created", "usage", "tokens",
                 "started", "stopped", "stop_reason", "tools", "tool_count", "_head", "_text_head", "_meta", "_seen",
                 "output_tool", "outputs")

    def __init__(self, chat: bool, strict: bool, include_usage: bool, model: str | None,
                 output_tool: str | None = None) -> None:
        self.splitter = SseSplitter()
        self.chat = chat
        self.strict = strict
        self.include_usage = include_usage
        self.model = model or ""
        self.created = int(time.time())
        self.usage: Usage | None = None
        self.tokens = Tokens()
        self.started = False
        self.stopped = False
        self.stop_reason: str | None = None
        #: content block index -> [tool counter, arguments sent]
        self.tools: dict[int, list] = {}
        self.tool_count = 0
        self._head = b""
        self._text_head = b""
        self._meta = b""
        self._seen = b""
        self.held_error: GatewayError | None = None
        #: the tool that carries response_format, and its content blocks: index -> whether any input was sent
        self.output_tool = output_tool
        self.outputs: dict[int, bool] = {}

    # --- the StreamTransformer interface ----------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[bytes]:
        self.raise_held()
        if not self.started and len(self._seen) < 200:
            self._seen += chunk[: 200 - len(self._seen)]
            if self._seen.lstrip()[:1] in (b"<", b"{", b"["):
                raise malformed(PROVIDER, "not an event stream", self._seen)
        events = self.splitter.feed(chunk)
        return self._events(events) if events else []

    def close(self) -> list[bytes]:
        self.raise_held()
        out = self._events(self.splitter.close())
        if self.held_error is not None:
            return out
        if not self.started:
            detail = f": {snippet(self._seen)}" if self._seen else ""
            raise malformed(PROVIDER, f"stream ended before message_start{detail}")
        if not self.stopped:
            raise malformed(PROVIDER, "stream ended before message_stop")
        return out

    # --- events -----------------------------------------------------------------------------------------------

    def _convert(self, events: list, out: list[bytes]) -> None:
        for name, data in events:
            if name == b"ping" or self.stopped:
                continue
            if name == b"error":
                raise stream_error(data)
            try:
                event = _event.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise malformed(PROVIDER, "stream event is not JSON", data) from None
            kind = event.type
            if kind == "content_block_delta":
                self._delta(event, out)
            elif kind == "content_block_start":
                self._block_start(event, out)
            elif kind == "content_block_stop":
                self._block_stop(event, out)
            elif kind == "message_start":
                self._start(event, out)
            elif kind == "message_delta":
                if event.delta is not None and event.delta.stop_reason is not None:
                    self.stop_reason = event.delta.stop_reason
                self.tokens.update(event.usage)
                self.usage = self.tokens.unified()
            elif kind == "message_stop":
                self._stop(out)
            elif kind == "error":
                raise stream_error(data)
            # ping and event types added later are ignored

    def _start(self, event: Event, out: list[bytes]) -> None:
        message = event.message or AMessage()
        self.started = True
        if message.model:
            self.model = message.model
        # message_start's figures are an opening count (output_tokens 1): they become the usage only with
        # message_delta's, so a stream that ends before those is estimated from what was relayed
        self.tokens.update(message.usage)
        obj = b"chat.completion.chunk" if self.chat else b"text_completion"
        self._meta = (b'{"id":' + _encode(message.id or "") + b',"object":"' + obj + b'","created":'
                      + str(self.created).encode() + b',"model":' + _encode(self.model)
                      + b',"system_fingerprint":null')
        if self.chat:
            self._head = b"data: " + self._meta + b',"choices":[{"index":0,"delta":'
            self._text_head = self._head + b'{"content":'
            out.append(self._head + b'{"role":"assistant","content":""}' + _CHUNK_TAIL)
        else:
            self._head = b"data: " + self._meta + b',"choices":[{"index":0,"text":'

    def _chunk(self, delta: dict) -> bytes:
        return self._head + _encode(delta) + _CHUNK_TAIL

    def _delta(self, event: Event, out: list[bytes]) -> None:
        delta = event.delta
        if delta is None:
            return
        kind = delta.type
        if kind == "text_delta":
            text = delta.text
            if not text or self.output_tool is not None:
                return
            if not self.chat:
                out.append(self._head + _encode(text) + _CHUNK_TAIL)
            elif self.strict:
                out.append(self._text_head + _encode(text) + b"}" + _CHUNK_TAIL)
            else:
                out.append(self._chunk({"content": text,
                                        "content_blocks": [{"index": event.index, "delta": {"text": text}}]}))
        elif kind == "input_json_delta":
            if event.index in self.outputs:
                if delta.partial_json:
                    self.outputs[event.index] = True
                    out.append(self._text_head + _encode(delta.partial_json) + b"}" + _CHUNK_TAIL)
                return
            tool = self.tools.get(event.index)
            if tool is None or not delta.partial_json:
                return
            tool[1] = True
            out.append(self._chunk({"tool_calls": [
                {"index": tool[0], "function": {"arguments": delta.partial_json}}]}))
        elif kind == "thinking_delta":
            if not self.strict and delta.thinking and self.chat:
                out.append(self._chunk({"content_blocks": [
                    {"index": event.index, "delta": {"thinking": delta.thinking}}]}))
        elif kind == "signature_delta":
            if not self.strict and delta.signature and self.chat:
                out.append(self._chunk({"content_blocks": [
                    {"index": event.index, "delta": {"signature": delta.signature}}]}))

    def _block_start(self, event: Event, out: list[bytes]) -> None:
        block = event.content_block
        if block is None or not self.chat:
            if block is not None and block.type == "text" and block.text:
                out.append(self._head + _encode(block.text) + _CHUNK_TAIL)
            return
        kind = block.type
        if kind == "tool_use" and self.output_tool is not None and block.name == self.output_tool:
            raw = bytes(block.input)
            has_input = bool(raw) and raw.replace(b" ", b"") != b"{}"
            self.outputs[event.index] = has_input
            if has_input:
                out.append(self._text_head + _encode(raw.decode()) + b"}" + _CHUNK_TAIL)
        elif kind == "tool_use":
            index = self.tool_count
            self.tool_count += 1
            raw = bytes(block.input)
            has_input = bool(raw) and raw.replace(b" ", b"") != b"{}"
            self.tools[event.index] = [index, has_input]
            out.append(self._chunk({"tool_calls": [{
                "index": index, "id": block.id or "", "type": "function",
                "function": {"name": block.name or "", "arguments": raw.decode() if has_input else ""},
            }]}))
        elif kind == "text":
            if block.text and self.output_tool is None:
                self._delta(Event(type="content_block_delta", index=event.index,
                                  delta=Delta(type="text_delta", text=block.text)), out)
        elif self.strict:
            return
        elif kind == "thinking":
            if block.thinking:
                out.append(self._chunk({"content_blocks": [
                    {"index": event.index, "delta": {"thinking": block.thinking}}]}))
        elif kind == "redacted_thinking":
            out.append(self._chunk({"content_blocks": [
                {"index": event.index, "delta": {"type": "redacted_thinking", "data": block.data}}]}))

    def _block_stop(self, event: Event, out: list[bytes]) -> None:
        if self.outputs.get(event.index) is False:
            self.outputs[event.index] = True  # the output tool called without input: an empty JSON object
            out.append(self._text_head + b'"{}"}' + _CHUNK_TAIL)
            return
        tool = self.tools.get(event.index)
        if tool is not None and not tool[1]:
            tool[1] = True  # a tool called without arguments: say so as an empty JSON object
            out.append(self._chunk({"tool_calls": [{"index": tool[0], "function": {"arguments": "{}"}}]}))

    def _stop(self, out: list[bytes]) -> None:
        self.stopped = True
        if not self.started:
            raise malformed(PROVIDER, "message_stop before message_start")
        reason_text = finish_reason(self.stop_reason)
        if reason_text == "tool_calls" and self.outputs and not self.tool_count:
            reason_text = "stop"  # only the output tool was called
        reason = _encode(reason_text)
        if self.chat:
            out.append(self._head + b'{},"logprobs":null,"finish_reason":' + reason + b"}]}\n\n")
        else:
            out.append(self._head + b'"","logprobs":null,"finish_reason":' + reason + b"}]}\n\n")
        self.usage = self.tokens.unified()
        if self.include_usage:
            out.append(b"data: " + self._meta + b',"choices":[],"usage":' + _encode(self.tokens.out()) + b"}\n\n")
