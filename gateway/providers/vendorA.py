"""vendorA and every vendorA-compatible provider: the unified format on the wire, passed through both ways.

Facts relied on (vendorA's public API reference): bearer auth in ``Authorization``; optional
``OpenAI-Organization`` and ``OpenAI-Project`` headers; paths ``/chat/completions``, ``/completions``,
``/embeddings``, ``/moderations`` under the ``/v1`` base, and the resource paths ``/files``, ``/batches``,
``/fine_tuning/jobs`` and ``/responses/{id}`` (``/input_items``) under the same base, with the same auth;
streams are data-only SSE ending with ``data: [DONE]``, and an in-band failure arrives as
``data: {"error": {...}}``; with ``stream_options.include_usage`` the last chunk carries ``usage`` and empty
``choices``.

The request body is forwarded as the bytes the client sent (or as rewritten by param overrides); the answer is
checked to be a JSON object (else a 502 naming the provider) and forwarded as received. Stream chunks are re-emitted
without decoding unless they may carry an error or usage.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway._speedups.sse_in_use import SseSplitter, encode_event, is_done, scan_relay
from gateway.http.errors import GatewayError
from gateway.http.sse import RELAY_CR
from gateway.providers.base import (
    AUDIO_SPEECH,
    AUDIO_TRANSCRIPTIONS,
    AUDIO_TRANSLATIONS,
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    IMAGES_EDITS,
    IMAGES_GENERATIONS,
    IMAGES_VARIATIONS,
    MODERATIONS,
    RERANK,
    InBandErrorHolder,
    ProviderAdapter,
    UpstreamCall,
    UpstreamResult,
    malformed,
    upstream_error,
)
from gateway.schema.common import Usage
from gateway.schema.config import Config
from gateway.upstream.request import UpstreamRequest

PATHS = {
    CHAT: "/chat/completions",
    COMPLETIONS: "/completions",
    EMBEDDINGS: "/embeddings",
    MODERATIONS: "/moderations",
    RERANK: "/rerank",
    IMAGES_GENERATIONS: "/images/generations",
    IMAGES_EDITS: "/images/edits",
    IMAGES_VARIATIONS: "/images/variations",
    AUDIO_TRANSCRIPTIONS: "/audio/transcriptions",
    AUDIO_TRANSLATIONS: "/audio/translations",
    AUDIO_SPEECH: "/audio/speech",
}


class _Envelope(msgspec.Struct):
    usage: Usage | None = None
    model: str | None = None
    error: Any = None


class _ChunkUsage(msgspec.Struct):
    usage: Usage | None = None
    error: Any = None
    choices: msgspec.Raw = msgspec.Raw()  # left undecoded: only "is it empty?" matters


_envelope = msgspec.json.Decoder(_Envelope)
_chunk = msgspec.json.Decoder(_ChunkUsage)
_NULL_USAGE_MEMBER = b',"usage":null'
_INSPECTED = (b'"error"', b'"usage"', b"[DONE]")


def _inspect_from(chunk: bytes) -> int:
    """Where the first event that may hold an error, usage or [DONE] starts, in a chunk that starts and ends on
    event boundaries with LF line ends (an event ends at the first blank line: JSON data holds no raw newline)."""
    cut = len(chunk)
    for marker in _INSPECTED:
        at = chunk.find(marker, 0, cut)
        if at >= 0:
            cut = at
    end = chunk.rfind(b"\n\n", 0, cut)
    return 0 if end < 0 else end + 2


def bearer_headers(api_key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


class VendorAAdapter(ProviderAdapter):
    """One instance per catalogue row: the name, the default base URL and the endpoints it serves."""

    asks_stream_usage = True

    def __init__(self, name: str, base_url: str, endpoints: frozenset[str] | None = None) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.endpoints = endpoints or frozenset({CHAT, COMPLETIONS, EMBEDDINGS, MODERATIONS})

    def url(self, call: UpstreamCall) -> str:
        base = call.target.custom_host or self.base_url
        return base.rstrip("/") + PATHS[call.endpoint]

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        target = call.target
        headers = bearer_headers(target.api_key)
        if target.vendorA_organization:
            headers["openai-organization"] = target.vendorA_organization
        if target.vendorA_project:
            headers["openai-project"] = target.vendorA_project
        return UpstreamRequest(self.url(call), headers, call.body)

    def resource_request(self, target: Config, method: str, path: str, query: str, body: Any,
                         content_type: str | None) -> UpstreamRequest:
        base = target.custom_host or self.base_url
        url = base.rstrip("/") + path + (f"?{query}" if query else "")
        return UpstreamRequest(url, self.resource_headers(target, content_type), body, method)

    def resource_headers(self, target: Config, content_type: str | None) -> dict[str, str]:
        headers = bearer_headers(target.api_key)
        if content_type:
            headers["content-type"] = content_type
        else:
            del headers["content-type"]
        if target.vendorA_organization:
            headers["openai-organization"] = target.vendorA_organization
        if target.vendorA_project:
            headers["openai-project"] = target.vendorA_project
        return headers

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        try:
            env = _envelope.decode(body)
        except msgspec.DecodeError:
            raise malformed(self.name, "not a JSON object", body) from None
        if env.error is not None:
            raise upstream_error(self.name, 502, body, headers)
        return UpstreamResult(body, env.usage, env.model)

    def stream(self, call: UpstreamCall) -> VendorAStream:
        transformer = VendorAStream(self.name)
        transformer.strip_usage = call.strip_usage
        return transformer


class VendorAStream(InBandErrorHolder):
    """Relays vendorA SSE chunks event by event; swallows the upstream's [DONE] (the pipeline writes one).

    Fast path: a chunk that starts and ends on event boundaries (the splitter holds nothing, the chunk ends with a
    blank line, has no CR) and cannot hold an error, usage or [DONE] is relayed as the very bytes received, with no
    splitting or re-encoding. In an aligned chunk that holds one of those, the events before the first that might
    are relayed the same way and only the rest goes through the splitter (the read that ends a stream, with usage
    and [DONE], often carries many events under load); anything else goes through the splitter. ``"usage":null`` (which
    vendorA puts on every chunk once usage is asked for) does not count as usage.

    ``strip_usage`` (``UpstreamCall.strip_usage``: the pipeline asked for usage the client did not ask for): the
    usage-only chunk (empty ``choices``) is read but not relayed, and the ``"usage":null`` members are dropped from
    the others.
    """

    __slots__ = ("provider", "splitter", "usage", "done", "_encode", "_is_done", "_scan", "aligned", "strip_usage")

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.splitter = SseSplitter()
        self._encode = encode_event
        self._is_done = is_done
        self._scan = scan_relay
        self.usage: Usage | None = None
        self.done = False
        self.held_error: GatewayError | None = None
        #: the splitter holds no partial event: the next chunk starts on an event boundary
        self.aligned = True
        self.strip_usage = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if self.held_error is not None:
            self.raise_held()
        chunk, flags = self._scan(chunk, self.strip_usage)
        ends_aligned = chunk.endswith(b"\n\n") and not flags & RELAY_CR
        if self.aligned and ends_aligned and not self.done:
            if not flags:
                return [chunk]
            start = _inspect_from(chunk)
            if start:  # the events before the first one to inspect go out as received
                self.aligned = self.passthrough_ready()
                out = [chunk[:start]]
                try:
                    out += self._events(self.splitter.feed(chunk[start:]))
                except GatewayError as error:
                    return self.hold(error, out)
                return out
        out = self._events(self.splitter.feed(chunk))
        self.aligned = ends_aligned and self.passthrough_ready()
        return out

    def passthrough_ready(self) -> bool:
        """Whether later aligned chunks may skip the splitter (subclasses that hold events back say no)."""
        return True

    def close(self) -> list[bytes]:
        self.raise_held()
        out = self._events(self.splitter.close())
        if not self.done and self.held_error is None:
            raise malformed(self.provider, "stream ended without [DONE]")
        return out

    def _events(self, events: list) -> list[bytes]:
        out: list[bytes] = []
        encode = self._encode
        for name, data in events:
            if self.done:
                continue
            if self._is_done(data):
                self.done = True
                continue
            if b'"error"' in data or b'"usage"' in data:
                try:
                    usage_only = self._inspect(name, data)
                except GatewayError as error:
                    return self.hold(error, out)
                if self.strip_usage:
                    if usage_only:
                        continue
                    data = data.replace(_NULL_USAGE_MEMBER, b"")
            out.append(encode(data))
        return out

    def _inspect(self, name: bytes | None, data: bytes) -> bool:
        """Raise the in-band error an event holds; note its usage. True for a usage-only chunk (no choices)."""
        try:
            doc = _chunk.decode(data)
        except msgspec.DecodeError:
            raise malformed(self.provider, "stream event is not JSON", data) from None
        if doc.error is not None:
            status = 500
            if isinstance(doc.error, dict):
                code = doc.error.get("code")
                if isinstance(code, int) and 400 <= code <= 599:
                    status = code
            raise upstream_error(self.provider, status, data)
        if doc.usage is not None:
            self.usage = doc.usage
            choices = bytes(doc.choices)
            return not choices or choices.replace(b" ", b"") == b"[]"
        return False
