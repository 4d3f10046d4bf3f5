"""The one provider-adapter interface: build the upstream request, turn answers, stream events and errors back.

An adapter is given an ``UpstreamCall`` (the effective target config, the decoded unified request and its bytes,
the request context) and

- ``build_request`` returns an ``UpstreamRequest`` (URL, headers with the provider's own auth, body bytes);
- ``parse_response`` turns a 2xx answer into unified (vendorA) JSON bytes plus usage;
- ``parse_error`` turns a non-2xx answer into a ``GatewayError`` carrying the provider's status and message;
- ``stream`` returns a ``StreamTransformer`` that turns upstream body bytes, chunk by chunk as they arrive, into
  encoded unified SSE events (never ``[DONE]``: the pipeline writes it) and raises a ``GatewayError`` on an
  in-band error event.

Adapters never touch sockets: the upstream client sends, routing decides. ``custom_host`` replaces the provider's
base URL and the adapter appends the same path it appends to its default base.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol

import msgspec

from gateway.http.context import RequestContext
from gateway.http.errors import BadUpstreamResponse, GatewayError, InvalidRequest, UpstreamError
from gateway.providers.fields import FieldTable
from gateway.schema.common import Usage
from gateway.schema.config import Config
from gateway.upstream.client import UpstreamClient
from gateway.upstream.error_text import CUT_MARK, bounded, bounded_field
from gateway.upstream.request import UpstreamRequest

# endpoint names
CHAT = "chat"
COMPLETIONS = "completions"
EMBEDDINGS = "embeddings"
MODERATIONS = "moderations"
RERANK = "rerank"
# long-running resources, forwarded in the vendorA wire format to providers that have them
FILES = "files"
BATCHES = "batches"
FINE_TUNING = "fine_tuning"
RESPONSES = "responses"
RESOURCES = frozenset({FILES, BATCHES, FINE_TUNING, RESPONSES})
# images and audio (gateway/pipeline/media.py): vendorA's wire format, bodies forwarded, answers relayed as they come
IMAGES_GENERATIONS = "images.generations"
IMAGES_EDITS = "images.edits"
IMAGES_VARIATIONS = "images.variations"
AUDIO_TRANSCRIPTIONS = "audio.transcriptions"
AUDIO_TRANSLATIONS = "audio.translations"
AUDIO_SPEECH = "audio.speech"
IMAGES = frozenset({IMAGES_GENERATIONS, IMAGES_EDITS, IMAGES_VARIATIONS})
AUDIO = frozenset({AUDIO_TRANSCRIPTIONS, AUDIO_TRANSLATIONS, AUDIO_SPEECH})
#: the Messages API, served as sent by providers that list it (the Messages door forwards to them)
MESSAGES = "messages"
MESSAGES_COUNT = "messages.count_tokens"


class UpstreamCall:
    """One attempt's input to an adapter.

    ``target`` is the effective leaf config (``gateway.schema.config.Config``, inheritance applied): provider,
    api_key, custom_host, cloud credentials, strict_vendorA_compliance, deployments... ``request`` is the decoded
    unified body Struct (``ChatRequest``, ``CompletionRequest``...) of ``body``, the bytes to send when the wire
    format is vendorA's. ``strip_usage``: the gateway asked the upstream for the stream's usage chunk (see
    ``ProviderAdapter.asks_stream_usage``) and the client did not, so the stream transformer drops it again.
    """

    __slots__ = ("endpoint", "target", "body", "request", "stream", "ctx", "model", "provider", "strip_usage")

    def __init__(
        self,
        endpoint: str,
        target: Config,
        body: bytes,
        request: Any,
        stream: bool,
        ctx: RequestContext,
        provider: str,
        strip_usage: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.target = target
        self.body = body
        self.request = request
        self.stream = stream
        self.ctx = ctx
        self.model: str | None = getattr(request, "model", None)
        self.provider = provider
        self.strip_usage = strip_usage


class UpstreamResult:
    """A unified 2xx answer."""

    __slots__ = ("body", "usage", "model")

    def __init__(self, body: bytes, usage: Usage | None = None, model: str | None = None) -> None:
        self.body = body
        self.usage = usage
        self.model = model


class StreamTransformer(Protocol):
    """Upstream stream bytes in, encoded unified SSE events out (without ``[DONE]``)."""

    usage: Usage | None

    def feed(self, chunk: bytes) -> list[bytes]:
        """Events completed by ``chunk``; raises GatewayError for an in-band upstream error."""

    def close(self) -> list[bytes]:
        """Events left at the upstream's end of stream (e.g. a final usage chunk)."""


class ProviderAdapter(abc.ABC):
    """Base class: every provider adapter implements the abstract methods (an adapter that misses one cannot be
    built, so the worker's start fails rather than the first request); shared helpers live here."""

    #: the provider name in the registry (set per instance for catalogue rows)
    name: str = ""
    #: endpoints this provider serves
    endpoints: frozenset[str] = frozenset()
    #: endpoint -> the table of the unified fields this adapter takes, refuses or drops (``fields.FieldTable``);
    #: None for adapters that send the client's body as it is (nothing to work out per request)
    fields: dict[str, FieldTable] | None = None
    #: a streamed chat or completions upstream reports usage only when the body asks for it (vendorA wire:
    #: ``stream_options.include_usage``): the pipeline then always asks, and sets ``UpstreamCall.strip_usage`` when
    #: the client did not ask
    asks_stream_usage: bool = False
    #: images and audio answers (``IMAGES``, ``AUDIO``) are relayed as they arrive, undecoded; an adapter that
    #: translates those routes sets False: the whole answer then goes through ``parse_response``
    relays_media: bool = True

    @classmethod
    def create(cls, client: UpstreamClient) -> ProviderAdapter:
        """The registry's adapter, given the runtime's upstream client (for adapters that make calls of their own)."""
        return cls()

    @abc.abstractmethod
    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """The upstream request for one attempt (URL, headers with the provider's own auth, body)."""

    @abc.abstractmethod
    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        """A 2xx answer as unified (vendorA) JSON bytes, with its usage."""

    def parse_error(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> GatewayError:
        return upstream_error(call.provider, status, body, headers)

    @abc.abstractmethod
    def stream(self, call: UpstreamCall) -> StreamTransformer:
        """A transformer of this call's upstream stream into unified SSE events."""

    def resource_request(self, target: Config, method: str, path: str, query: str, body: Any,
                         content_type: str | None) -> UpstreamRequest:
        """A files, batches, fine-tuning or stored-responses call (``path`` under the vendorA ``/v1`` base, e.g.
        ``/files/file-abc/content``; ``query`` without ``?``; ``body`` bytes or a binary file object) in this
        provider's URL and auth. Only providers listing those endpoints implement it (``check_endpoint`` first)."""
        raise InvalidRequest(f"provider '{self.name}' does not serve {path}", param="provider")

    def serves(self, endpoint: str, model: str | None) -> bool:
        """Whether this provider serves ``endpoint`` for ``model`` (a front door forwards such requests as sent)."""
        return endpoint in self.endpoints

    async def forward_request(self, call: UpstreamCall, path: str) -> UpstreamRequest:
        """A front door's request forwarded in its own wire format (``path`` under the provider's base, e.g.
        ``/responses``; ``call.body`` the client's body): by default the resource call of ``resource_request``."""
        return self.resource_request(call.target, "POST", path, "", call.body, "application/json")

    def forward_decoder(self, call: UpstreamCall) -> Any:
        """What turns a forwarded stream's wire bytes into the dialect's SSE (``feed(bytes) -> list[bytes]``), or
        None when the provider streams the dialect's SSE itself."""
        return None

    def dropped_params(self, endpoint: str, target: Config, body: bytes) -> bytes | None:
        """The ``x-gateway-dropped-params`` value for a body sent to ``target`` (None when nothing is dropped); the
        pipeline asks only adapters that have ``fields``."""
        table = self.fields.get(endpoint) if self.fields is not None else None
        if table is None:
            return None
        return table.dropped(body, getattr(target, "strict_vendorA_compliance", None) is not False)

    def check_endpoint(self, endpoint: str) -> None:
        if endpoint not in self.endpoints:
            raise InvalidRequest(
                f"provider '{self.name}' does not support the {endpoint} endpoint", param="provider"
            )

    async def close(self) -> None:  # noqa: B027 - an optional hook: most adapters hold nothing
        """Release anything the adapter holds."""


# --- shared helpers -------------------------------------------------------------------------------------------

class _ErrorDetail(msgspec.Struct):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    param: str | None = None


class _ErrorEnvelope(msgspec.Struct):
    error: _ErrorDetail | str | None = None
    message: str | None = None


_error_decoder = msgspec.json.Decoder(_ErrorEnvelope)
_RELAYED_HEADERS = ("retry-after", "retry-after-ms", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")


def relayed_headers(headers: Any) -> list[tuple[bytes, bytes]] | None:
    """Upstream headers worth passing to the client with an error (Retry-After and friends)."""
    if headers is None:
        return None
    out = []
    for name in _RELAYED_HEADERS:
        value = headers.get(name)
        if value is not None:
            out.append((name.encode(), value.encode("latin-1")))
    return out or None


def snippet(body: bytes, limit: int = 200) -> str:
    """The start of a body, for messages that say what an upstream sent (saying how much was left out)."""
    text = body[:limit].decode("utf-8", "replace")
    return text + (f"{CUT_MARK}{len(body) - limit} bytes]" if len(body) > limit else "")


def upstream_error(
    provider: str,
    status: int,
    body: bytes,
    headers: Any = None,
    message: str | None = None,
    type_: str | None = None,
    code: str | int | None = None,
) -> UpstreamError:
    """The provider's error relayed with its status and message, in the vendorA envelope, naming the provider.

    With no ``message`` given, the body is read as a vendorA-style ``{"error": {...}}`` (or ``{"message"}``).
    The message is cut to a few KiB and ``type``, ``code`` and ``param`` shorter (``gateway/upstream/error_text.py``).
    """
    param = None
    if message is None:
        try:
            env = _error_decoder.decode(body)
        except msgspec.DecodeError:
            env = None
        if env is not None and isinstance(env.error, _ErrorDetail):
            message = env.error.message
            type_ = type_ or env.error.type
            code = code if code is not None else env.error.code
            param = env.error.param
        elif env is not None and isinstance(env.error, str):
            message = env.error
        elif env is not None and env.message:
            message = env.message
        if not message:
            message = f"{provider} returned HTTP {status}" + (f": {snippet(body)}" if body else "")
    if status < 400 or status > 599:
        status = 502
    return UpstreamError(
        bounded(message),
        status=status,
        type=bounded_field(type_) or "upstream_error",
        code=None if code is None else bounded_field(str(code)),
        param=bounded_field(param),
        extra={"provider": provider},
        headers=relayed_headers(headers),
    )


class InBandErrorHolder:
    """Stream-transformer mixin: an in-band error met after other events of the same upstream read is held back,
    so those events reach the client first (and, before the first event, decide the status); it is raised at the
    next ``feed()`` or ``close()``. Subclasses set ``held_error = None`` when built, call ``raise_held`` first in
    ``feed``/``close``, and either implement ``_convert(events, out)`` (used by ``_events``) or call ``hold``."""

    __slots__ = ("held_error",)
    held_error: GatewayError | None

    def hold(self, error: GatewayError, out: list[bytes]) -> list[bytes]:
        if not out:
            raise error
        self.held_error = error
        return out

    def raise_held(self) -> None:
        error = getattr(self, "held_error", None)
        if error is not None:
            self.held_error = None
            raise error

    def _events(self, events: list) -> list[bytes]:
        """Convert split events with ``self._convert(events, out)``, holding an error met after some output."""
        out: list[bytes] = []
        try:
            self._convert(events, out)
        except GatewayError as error:
            return self.hold(error, out)
        return out

    def _convert(self, events: list, out: list[bytes]) -> None:
        raise NotImplementedError


def malformed(provider: str, what: str, body: bytes = b"") -> BadUpstreamResponse:
    """A 502 that says which provider sent what."""
    detail = f": {snippet(body)}" if body else ""
    return BadUpstreamResponse(
        f"{provider} returned a malformed response ({what}){detail}", extra={"provider": provider}
    )
