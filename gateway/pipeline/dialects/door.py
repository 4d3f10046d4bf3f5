"""A front door's pipeline: the chat pipeline's admission, routing, retries, fallbacks, breakers, timeouts, policies,
steps and request log, with each attempt either forwarded (the target's provider serves the dialect) or translated
to unified chat and back (every other provider), so a fallback may cross dialects and the client always gets its
own dialect's answer, events and error shape.

Authentication on these routes (see docs/front-doors.md#authentication): ``x-gateway-api-key`` is the gateway key;
with it, ``Authorization: Bearer`` (and, for clients that only send ``x-api-key``, that header) is the provider key,
as on chat. Without it, ``x-api-key`` or else the bearer token is the gateway key and is never sent upstream: the
provider credential then comes from the config (a provider slug or a saved config).

Cache and guardrails run on the translated (unified chat) form of the request: input checks and the cache lookup
on every attempt; output checks and storing in the cache on translated answers (a forwarded answer is relayed byte
for byte). A request whose input a guardrail redacts is translated (the redaction is in the unified body).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway._speedups.context_in_use import build_context
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError
from gateway.http.respond import gateway_headers, send_json
from gateway.http.types import Receive, Send
from gateway.observability.record import RequestRecord
from gateway.pipeline.dialects.base import Dialect, DoorRequest, NativeStream, TranslatedStream, dialect_error
from gateway.pipeline.outcome import JsonOutcome, StreamOutcome
from gateway.pipeline.pipeline import AnswerReader, Attempt, Exchange, Pipeline, PipelineParts, UnifiedFlow
from gateway.pipeline.relay import StreamRelay
from gateway.providers.base import CHAT, ProviderAdapter, UpstreamCall, malformed
from gateway.routing.execute import RunState, needs_router
from gateway.routing.params import needs_rewrite, rewrite
from gateway.routing.plan import Node
from gateway.schema.chat import parse_chat
from gateway.upstream.transport import UpstreamResponse

_decode = msgspec.json.decode
_encode = msgspec.json.encode
_GATEWAY_KEY = b"x-gateway-api-key"
#: a count_tokens answer worked out by the gateway, not the provider
ESTIMATE_HEADER = (b"x-gateway-token-count", b"estimate")
#: a translated answer whose output limit was cut to the model's maximum: ``<asked>-><maximum>``
CAPPED_HEADER = b"x-gateway-max-tokens-capped"


def door_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request headers with the single-token forms read as the doors document (see the module docstring)."""
    gateway_key = None
    api_key = None
    bearer_at = None
    for i, (name, value) in enumerate(headers):
        if name == _GATEWAY_KEY:
            gateway_key = value
        elif name == b"x-api-key":
            api_key = value
        elif name == b"authorization" and value[:7].lower() == b"bearer ":
            bearer_at = i
    if gateway_key is not None:
        if api_key is not None and bearer_at is None:  # the anthropic SDK sends its api_key here
            return [*headers, (b"authorization", b"Bearer " + api_key)]
        return headers
    token = api_key if api_key is not None else (headers[bearer_at][1][7:].strip() if bearer_at is not None else None)
    if token is None:
        return headers
    kept = [(n, v) for n, v in headers if n != b"x-api-key" and not (n == b"authorization" and v[:7].lower() ==
                                                                       b"bearer ")]
    kept.append((_GATEWAY_KEY, token))
    return kept


class DialectRelay(StreamRelay):
    """A stream relayed in a dialect: no ``[DONE]``, errors as the dialect's error event."""

    __slots__ = ("dialect",)
    done = b""

    def __init__(self, outcome: StreamOutcome, record: RequestRecord, dialect: Dialect) -> None:
        super().__init__(outcome, record)
        self.dialect = dialect

    def error_event(self, error: GatewayError) -> bytes:
        events = getattr(self.outcome.transformer, "events", None)
        if events is not None:
            data: bytes = events.error(error)
            return data
        return self.dialect.stream_error(error)


def door_context(headers: Any) -> RequestContext:
    """The request's context with the door's credential forms read first (``door_headers``)."""
    return build_context(door_headers(list(headers)))


def door_pipeline(parts: PipelineParts, dialect: Dialect, store: Any = None) -> Pipeline:
    """One dialect route: the pipeline with the door's reading of credentials, its flow and its error shape."""
    flow = DoorFlow(dialect, store)
    return Pipeline(parts, dialect.name, dialect.parse, flow=flow, build=door_context, error_shape=flow.error_shape)


class DoorFlow:
    """A front door's flow (``dialect``): attempts forwarded or translated, a translated answer turned back into
    the dialect, written as the chat flow writes (with the dialect's relay); ``store`` keeps what a dialect
    remembers (stored responses)."""

    __slots__ = ("dialect", "store", "reader", "unified")

    def __init__(self, dialect: Dialect, store: Any = None) -> None:
        self.dialect = dialect
        self.store = store
        #: how a forwarded answer is read (the same for every request of this door)
        self.reader = NativeReader(dialect)
        #: the chat flow's writer with the dialect's relay
        self.unified = UnifiedFlow(self._relay)

    def _relay(self, outcome: StreamOutcome, record: RequestRecord) -> StreamRelay:
        return DialectRelay(outcome, record, self.dialect)

    def error_shape(self, error: GatewayError) -> GatewayError:
        return dialect_error(error, self.dialect)

    async def run(self, pipeline: Pipeline, ex: Exchange, body: bytes, request: Any, node: Node
                  ) -> JsonOutcome | StreamOutcome:
        ctx = ex.ctx
        assert ctx is not None
        dialect = self.dialect
        await dialect.prepare(request, ctx, self.store)
        params_cache: list[dict] = []

        def params() -> dict:
            if not params_cache:
                params_cache.append(request.doc)
            return params_cache[0]

        ex.state = state = RunState(ctx.request_timeout, ctx.metadata, params)
        steps = None
        if node.tree_has_steps:
            _, chat_request = self.chat_view(request)
            ex.steps = steps = pipeline.parts.steps().for_request(ctx, CHAT, chat_request, request.stream, ex.record)
        attempt = DoorAttempt(pipeline, self, ctx, body, request, ex.record, steps)
        router = pipeline.parts.router
        if needs_router(node, state, router.default_timeout_ms):
            outcome = await router.run(node, attempt, state)
        else:
            state.attempts = 1
            outcome = await attempt(node)
        native = id(outcome) in attempt.native
        if request.capped is not None and not native:  # the translation cut max_tokens to the model's maximum
            ex.headers = [(CAPPED_HEADER, request.capped)]
        if steps is not None and not native:
            dropped = outcome.dropped
            outcome = await steps.answered(outcome)
            outcome.dropped = dropped
        if native or id(outcome) in attempt.estimated:
            return outcome
        if isinstance(outcome, JsonOutcome):
            if outcome.status < 400:
                outcome.body = dialect.answer(request, outcome.body)
                await dialect.answered(request, ctx, self.store, outcome.body)
            return outcome
        translated = TranslatedStream(outcome.transformer, dialect.events(request))
        first = translated.translate(outcome.first)
        if outcome.ended:
            translated.events.end(outcome.transformer.usage, first)
        outcome.first = first
        outcome.transformer = translated
        ex.record.request = request
        return outcome

    def chat_view(self, request: DoorRequest) -> tuple[bytes, Any]:
        """The unified chat body and its decoded request (translated once per request)."""
        if request.chat is None:
            body = _encode(self.dialect.to_chat(request))
            request.chat = (body, parse_chat(body))
        return request.chat

    async def respond(self, pipeline: Pipeline, ex: Exchange, receive: Receive, send: Send,
                      outcome: JsonOutcome | StreamOutcome) -> None:
        if isinstance(outcome, JsonOutcome) and outcome.provider == "" and ex.ctx is not None:
            record = ex.record  # a token count the gateway estimated: nothing was sent upstream
            record.status = 200
            headers = gateway_headers(ex.ctx.trace_id, None, "DISABLED", ex.state)
            headers.append(ESTIMATE_HEADER)
            await send_json(send, 200, outcome.body, headers)
            pipeline.finish(ex, outcome.body)
            return
        await self.unified.respond(pipeline, ex, receive, send, outcome)
        transformer = getattr(outcome, "transformer", None)
        final = getattr(getattr(transformer, "events", None), "final", None)
        if final is not None and ex.ctx is not None and ex.record.status == 200:
            await self.dialect.answered(ex.record.request, ex.ctx, self.store, final)


class DoorAttempt:
    """One attempt of a dialect request: forwarded to a provider serving the dialect, else translated to unified
    chat and sent as a chat attempt is (``chat``, an ``Attempt`` over the unified view). Remembers which outcomes
    it forwarded (``native``) and which it estimated without an upstream (``estimated``)."""

    __slots__ = ("chat", "door", "dialect", "door_body", "door_request", "native", "estimated")

    def __init__(self, pipeline: Pipeline, door: DoorFlow, ctx: Any, body: bytes, request: DoorRequest,
                 record: RequestRecord, steps: Any) -> None:
        self.chat = chat = Attempt(pipeline, ctx, body, request, record, self._chat_params, steps)
        chat.endpoint = CHAT
        chat.parse = parse_chat
        self.door = door
        self.dialect = door.dialect
        self.door_body = body
        self.door_request = request
        self.native: set[int] = set()
        self.estimated: set[int] = set()
        if steps is not None:
            chat.body, chat.request = door.chat_view(request)

    def _chat_params(self) -> dict:
        params: dict = _decode(self.door.chat_view(self.door_request)[0])
        return params

    async def __call__(self, node: Node) -> JsonOutcome | StreamOutcome:
        chat = self.chat
        _, adapter = chat.target_adapter(node)
        dialect = self.dialect
        if adapter.serves(dialect.native_endpoint, self.door_request.model):
            steps = chat.steps
            if steps is not None:
                new_body, cached = await steps.before_attempt(node, chat.body, None)
                if cached is not None:
                    return cached
                if new_body is not None:  # a redacted input: the redaction is in the unified body
                    return await self._translated(node)
            outcome = await self._forward(adapter, node)
            self.native.add(id(outcome))
            return outcome
        return await self._translated(node)

    async def _translated(self, node: Node) -> JsonOutcome | StreamOutcome:
        estimate = self.dialect.estimate(self.door_request)
        if estimate is not None:
            outcome = JsonOutcome(estimate, None, self.door_request.model, "")
            self.estimated.add(id(outcome))
            return outcome
        chat = self.chat
        if chat.body is self.door_body:
            chat.body, chat.request = self.door.chat_view(self.door_request)
        return await chat(node)

    async def _forward(self, adapter: ProviderAdapter, node: Node) -> JsonOutcome | StreamOutcome:
        """The client's body sent as it came (params rewritten for the node), the answer relayed as it comes."""
        chat = self.chat
        config = node.config
        dialect = self.dialect
        request = self.door_request
        stream = request.stream
        body = self.door_body
        if needs_rewrite(config):
            body = _encode(rewrite(dict(request.doc), config))
        provider: str = config.provider or ""  # checked by target_adapter
        call = UpstreamCall(dialect.native_endpoint, config, body, request, stream, chat.ctx, provider)
        upstream = await adapter.forward_request(call, dialect.native_path)
        for name in dialect.native_headers:
            value = _header(chat.ctx.raw_headers, name)
            if value:
                upstream.headers[name] = value
        chat.record.request = request
        return await chat.exchange(adapter, call, upstream, self.door.reader)


class NativeReader(AnswerReader):
    """Reads a forwarded answer in the dialect itself: the JSON as the provider sent it (usage read from it), a
    stream relayed as it comes (``NativeStream`` reads its usage and a leading error)."""

    __slots__ = ("dialect",)

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def json(self, adapter: ProviderAdapter, call: UpstreamCall, response: UpstreamResponse, data: bytes,
             dropped: bytes | None) -> JsonOutcome:
        """The answer relayed as sent; one that is not a JSON object is a 502 naming the provider, as on chat."""
        try:
            doc = _decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            doc = None
        if not isinstance(doc, dict):
            raise malformed(call.provider, f"its {self.dialect.name} answer is not a JSON object", data)
        return JsonOutcome(data, self.dialect.native_usage(doc), call.model, call.provider)

    def transformer(self, adapter: ProviderAdapter, call: UpstreamCall) -> Any:
        return NativeStream(self.dialect, call.provider, adapter.forward_decoder(call))


def _header(raw: Any, name: str) -> str | None:
    wanted = name.encode()
    for key, value in raw or ():
        if key == wanted:
            return bytes(value).decode("latin-1")
    return None
