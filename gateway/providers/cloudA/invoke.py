"""cloudA's anthropic models in anthropic's own body (the Messages API door forwards to them).

Facts relied on (AWS's Bedrock Runtime API reference, "InvokeModel" and "InvokeModelWithResponseStream", and
Anthropic's "Claude on Amazon Bedrock" guide): ``POST /model/{modelId}/invoke`` takes the Messages API body without
``model`` and ``stream`` and with ``anthropic_version: bedrock-2023-05-31`` and answers the message JSON;
``POST /model/{modelId}/invoke-with-response-stream`` answers ``application/vnd.amazon.eventstream`` whose ``chunk``
events carry ``{"bytes": <base64 of one anthropic stream event's JSON>}``; in-band failures are ``exception``
messages. The stream is re-framed here as anthropic's SSE (``event: <type>`` + ``data: <the event JSON>``), the JSON
relayed as decoded, unchanged.
"""

from __future__ import annotations

import base64

import msgspec

from gateway.providers.base import malformed
from gateway.providers.cloudA import converse
from gateway.providers.cloudA.eventstream import EventStreamDecoder, EventStreamError

#: the ``anthropic_version`` body member of anthropic models on cloudA
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


class _Chunk(msgspec.Struct):
    bytes: str = ""


class _Type(msgspec.Struct):
    type: str = ""


_chunk = msgspec.json.Decoder(_Chunk)
_type = msgspec.json.Decoder(_Type)


def invoke_body(body: bytes) -> bytes:
    """The Messages body as InvokeModel takes it."""
    doc = msgspec.json.decode(body)
    doc.pop("model", None)
    doc.pop("stream", None)
    doc["anthropic_version"] = BEDROCK_ANTHROPIC_VERSION
    return msgspec.json.encode(doc)


class InvokeStreamToSse:
    """InvokeModelWithResponseStream bytes in, anthropic SSE event bytes out (a GatewayError on an exception)."""

    __slots__ = ("provider", "decoder")

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.decoder = EventStreamDecoder()

    def feed(self, data: bytes) -> list[bytes]:
        try:
            messages = self.decoder.feed(data)
        except EventStreamError as exc:
            raise malformed(self.provider, f"bad event stream: {exc}") from None
        out = []
        for message in messages:
            if message.message_type == "exception":
                raise converse.exception_error(self.provider, message.exception_type or "internalServerException",
                                               message.payload)
            if message.event_type != "chunk":
                continue
            try:
                event = base64.b64decode(_chunk.decode(message.payload).bytes)
                name = _type.decode(event).type
            except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
                raise malformed(self.provider, "chunk event is not base64 JSON", message.payload) from None
            out.append(b"event: " + name.encode() + b"\ndata: " + event + b"\n\n")
        return out
