"""cloudC streamGenerateContent (``alt=sse``) -> unified chat.completion.chunk events, event by event.

Each upstream SSE event's data is one GenerateContentResponse (``alt=sse``; lines end with CRLF on the real
service, which stream parsers of other projects handle explicitly; the splitter takes any line ending). With
SAFETY and similar stops the streamed candidate's content is empty (Candidate.FinishReason reference).

Out: one chunk id (and ``"system_fingerprint": null``) for the whole stream; per candidate, a delta with the text
of the event's parts (the first also carries ``role: assistant``), ``tool_calls`` deltas for ``functionCall`` parts
(each call complete in one delta, with its index, generated id, name and JSON arguments), thought parts as
``content_blocks`` deltas (``{"index": 0, "delta": {"thinking": ...}}``) only when strict_vendorA_compliance is
explicitly false; a finish chunk (empty delta, mapped finish_reason) when a candidate's ``finishReason`` arrives;
and, with ``stream_options.include_usage``, a last chunk with empty ``choices`` and the usage of the final
``usageMetadata``. An event ``{"error": {...}}`` raises the upstream error; a stream that ends before any
``finishReason`` is a 502.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from gateway._speedups.sse_in_use import SseSplitter, encode_event
from gateway.http.errors import GatewayError
from gateway.providers.base import InBandErrorHolder, malformed
from gateway.providers.cloudC.gemini import (
    PROVIDER,
    completion_id,
    finish_reason,
    google_error,
    tool_call,
    usage_doc,
)
from gateway.providers.cloudC.wire import response_decoder
from gateway.schema.common import Usage

_encode = msgspec.json.encode


class GeminiStream(InBandErrorHolder):
    """One stream's state: the chunk prefix, which candidates have started and finished, tool-call counters."""

    __slots__ = ("splitter", "_encode_event", "usage", "model", "include_usage", "thoughts", "prefix",
                 "started", "finished", "calls", "usage_meta")

    def __init__(self, model: str | None, include_usage: bool, thoughts: bool) -> None:
        self.splitter = SseSplitter()
        self._encode_event = encode_event
        self.usage: Usage | None = None
        self.model = model
        self.include_usage = include_usage
        self.thoughts = thoughts
        self.prefix: bytes | None = None
        self.started: set[int] = set()
        self.finished: set[int] = set()
        self.calls: dict[int, int] = {}
        self.usage_meta: Any = None
        self.held_error: GatewayError | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        self.raise_held()
        return self._events(self.splitter.feed(chunk))

    def close(self) -> list[bytes]:
        self.raise_held()
        out = self._events(self.splitter.close())
        if self.held_error is not None:
            return out
        if not self.finished:
            raise malformed(PROVIDER, "stream ended without a finishReason")
        doc, self.usage = usage_doc(self.usage_meta)
        if self.include_usage:
            assert self.prefix is not None
            out.append(self._encode_event(self.prefix + b'[],"usage":' + _encode(doc) + b"}"))
        return out

    def _start(self, response_id: str | None, model_version: str | None) -> bytes:
        model = model_version or self.model
        self.prefix = (b'{"id":' + _encode(completion_id(response_id)) + b',"object":"chat.completion.chunk",'
                       b'"created":' + str(int(time.time())).encode() + b',"model":' + _encode(model) +
                       b',"system_fingerprint":null,"choices":')
        return self.prefix

    def _chunk(self, choices: list[dict[str, Any]]) -> bytes:
        assert self.prefix is not None  # _start came first
        return self._encode_event(self.prefix + _encode(choices) + b"}")

    def _convert(self, events: list, out: list[bytes]) -> None:
        for _name, data in events:
            if not data.strip():
                continue
            try:
                doc = response_decoder.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise malformed(PROVIDER, "stream event is not a GenerateContentResponse", data) from None
            if doc.error is not None:
                raise google_error(0, data)
            if self.prefix is None:
                self._start(doc.response_id, doc.model_version)
            if doc.usage_metadata is not None:
                self.usage_meta = doc.usage_metadata
            if not doc.candidates:
                if doc.prompt_feedback is not None and doc.prompt_feedback.block_reason and 0 not in self.finished:
                    self.finished.add(0)
                    out.append(self._chunk([{"index": 0, "delta": {"role": "assistant", "content": None},
                                             "logprobs": None, "finish_reason": "content_filter"}]))
                continue
            for candidate in doc.candidates:
                out.extend(self._candidate(candidate))

    def _candidate(self, candidate: Any) -> list[bytes]:
        index = candidate.index
        if index in self.finished:
            return []
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        parts = candidate.content.parts if candidate.content is not None else ()
        for part in parts:
            if part.function_call is not None:
                number = self.calls.get(index, 0)
                self.calls[index] = number + 1
                call = tool_call(part.function_call, part.thought_signature)
                call["index"] = number
                calls.append(call)
            elif part.text is not None:
                if not part.thought:
                    texts.append(part.text)
                elif self.thoughts:
                    thought = {"thinking": part.text}
                    if part.thought_signature:
                        thought["signature"] = part.thought_signature
                    blocks.append({"index": 0, "delta": thought})
        out: list[bytes] = []
        if texts or calls or blocks:
            delta: dict[str, Any] = {}
            if index not in self.started:
                self.started.add(index)
                delta["role"] = "assistant"
            if texts or not calls:
                delta["content"] = "".join(texts)
            if calls:
                delta["tool_calls"] = calls
            if blocks:
                delta["content_blocks"] = blocks
            out.append(self._chunk([{"index": index, "delta": delta, "logprobs": None, "finish_reason": None}]))
        if candidate.finish_reason:
            self.finished.add(index)
            reason = finish_reason(candidate.finish_reason, self.calls.get(index, 0) > 0)
            out.append(self._chunk([{"index": index, "delta": {}, "logprobs": None, "finish_reason": reason}]))
        return out
