"""The inference pipeline shared by chat, completions, embeddings, moderations and rerank.

context -> auth -> body -> config (a prompt template rendered into the body when the config or the route names
one) -> body decoded once -> routing tree -> attempts (adapter builds, upstream client sends, adapter turns the
answer back) -> JSON or SSE out with the x-gateway-* response headers. A stream's first event is read before the
status is committed, so an in-band error becomes a real status that retries and fallbacks act on.

Usage is counted on every path: an upstream that reports a stream's usage only when asked (the adapter's
``asks_stream_usage``: vendorA's wire, ``stream_options.include_usage``) is always asked for it on streaming chat or
completions, and the call's ``strip_usage`` drops it again before it reaches a client that did not ask for it; a
stream the client leaves is logged as 499, one that breaks off as the error it ended with, both with the usage so
far (the provider's, else the gateway's estimate). Each record says where its tokens come from (usage_source).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

import msgspec

from gateway._speedups.context_in_use import build_context
from gateway.config.resolve import ConfigResolver
from gateway.controlplane.auth import authenticate
from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.controlplane.keys import IN_PROCESS_KEY, KeyRecord, KeyStore, missing_scope
from gateway.http.body import ClientDisconnected, read_request_body
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError, InvalidRequest, internal_error
from gateway.http.respond import CACHE_STATUS, gateway_headers, send_error, send_json
from gateway.http.types import RawHeaders, Receive, Scope, Send
from gateway.observability.record import Recorder, RequestRecord
from gateway.pipeline import prompted
from gateway.pipeline.outcome import JsonOutcome, StreamOutcome, stream_broke
from gateway.pipeline.relay import StreamRelay
from gateway.policies.gate import PolicyGate
from gateway.providers.base import CHAT, COMPLETIONS, ProviderAdapter, UpstreamCall
from gateway.providers.registry import ProviderRegistry
from gateway.routing.execute import Router, RunState, needs_router
from gateway.routing.params import needs_rewrite, rewrite
from gateway.routing.plan import Node, Planner
from gateway.schema.config import Config
from gateway.upstream.exchange import UpstreamExchange, masked
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse

if TYPE_CHECKING:  # made on first use: a worker whose configs cache nothing and run no guardrails never imports it
    from gateway.pipeline.steps import PipelineSteps, RequestSteps

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode
#: endpoints whose answers are text, counted in tokens (and estimated when the provider reports none)
_TEXT_ENDPOINTS = frozenset({CHAT, COMPLETIONS})
_USAGE_OPTION = b'{"stream_options":{"include_usage":true},'
#: the fields the answering target did not send upstream (see gateway/providers/fields.py)
DROPPED_HEADER = b"x-gateway-dropped-params"
PROMPTS_RUN = "prompts.run"
#: the error of a request whose handler was cancelled before it ended
DROPPED_ERROR = "the request was cancelled before it ended (the worker stopping, or its session closing)"


def with_stream_usage(body: bytes, has_options: bool) -> bytes:
    """The body asking a vendorA-wire upstream for its usage chunk (``stream_options.include_usage``).

    The common case (no ``stream_options`` sent) splices the member into the bytes; otherwise the body is decoded
    and re-encoded with ``include_usage`` set.
    """
    if not has_options and b'"stream_options"' not in body:
        start = body.find(b"{")
        rest = body[start + 1:].lstrip()
        return _USAGE_OPTION + rest if rest[:1] != b"}" else _USAGE_OPTION[:-1] + rest
    doc = _json_decode(body)
    options = doc.get("stream_options")
    doc["stream_options"] = {**options, "include_usage": True} if isinstance(options, dict) else {
        "include_usage": True}
    return _json_encode(doc)


class PipelineParts:
    """The worker's objects a pipeline uses (``gateway.runtime.Runtime.pipeline_parts`` makes it once): the key
    store, the records and config resolution, the policy gate, the router and adapters, the upstream exchange and
    the recorder; ``steps`` makes (once, on first use) the cache and guardrail steps a config with either needs."""

    __slots__ = ("keys", "records", "resolver", "planner", "policies", "router", "providers", "exchange", "recorder",
                 "steps", "max_body_bytes", "log_bodies")

    def __init__(self, keys: KeyStore, records: RecordCache, resolver: ConfigResolver, planner: Planner,
                 policies: PolicyGate, router: Router, providers: ProviderRegistry, exchange: UpstreamExchange,
                 recorder: Recorder, steps: Callable[[], PipelineSteps], max_body_bytes: int, log_bodies: bool
                 ) -> None:
        self.keys = keys
        self.records = records
        self.resolver = resolver
        self.planner = planner
        self.policies = policies
        self.router = router
        self.providers = providers
        #: every upstream call of a request goes through it (``gateway.upstream.exchange``)
        self.exchange = exchange
        self.recorder = recorder
        self.steps = steps
        self.max_body_bytes = max_body_bytes
        self.log_bodies = log_bodies


class Exchange:
    """One request as far as it got: its record, and its context, routing state and steps once made (what the
    error answer and the log line need whatever failed)."""

    __slots__ = ("record", "ctx", "state", "steps", "form", "headers")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.ctx: RequestContext | None = None
        self.state: RunState | None = None
        self.steps: RequestSteps | None = None
        #: an images or audio request's multipart form, once read (closed when the request ends)
        self.form: Any = None
        #: response headers the run adds to the answer (a front door's ``x-gateway-max-tokens-capped``)
        self.headers: RawHeaders | None = None


class Flow(Protocol):
    """How a pipeline runs an admitted request and answers it: the chat flow (``UnifiedFlow``), the images and
    audio routes' (``media.MediaFlow``) and a front door's (``dialects.door.DoorFlow``)."""

    async def run(self, pipeline: Pipeline, ex: Exchange, body: bytes, request: Any, node: Node) -> Any: ...

    async def respond(self, pipeline: Pipeline, ex: Exchange, receive: Receive, send: Send, outcome: Any) -> None: ...


class FormReader(Protocol):
    """A multipart body, read once the config is known (``media.FormBody``)."""

    async def read(self, pipeline: Pipeline, ex: Exchange, scope: Scope, receive: Receive, config: Config) -> bytes:
        ...


class Pipeline:
    """One endpoint's handler, put together from parts: the ``endpoint`` name and its body parser, how the body is
    read (JSON, or a multipart ``form``), and the ``flow`` that runs the request and writes the answer. A request is
    admitted (key, body, config, policies), run (routing, steps, upstream attempts), then answered.

    No pipeline subclasses another: the images and audio routes and the front doors are this class with their
    flow (and a form reader, a header reading, an error shape) handed in."""

    def __init__(self, parts: PipelineParts, endpoint: str, parse: Callable[[bytes], Any], prompt_route: bool = False,
                 scope: str = "inference", *, flow: Flow | None = None, form: FormReader | None = None,
                 build: Callable[[Any], RequestContext] = build_context,
                 error_shape: Callable[[GatewayError], GatewayError] | None = None) -> None:
        self.parts = parts
        self.endpoint = endpoint
        self.parse = parse
        #: ``POST /v1/prompts/{prompt_id}/completions``: the body is a render body for that prompt
        self.prompt_route = prompt_route
        self.scope = scope
        #: runs an admitted request and answers it (the unified chat flow unless handed one)
        self.flow: Flow = flow if flow is not None else UNIFIED_FLOW
        #: the multipart body of an images or audio route; None: a JSON body
        self.form = form
        #: headers -> RequestContext: the compiled kernel or its pure twin (``context_in_use``, chosen at import),
        #: or a front door's reading of its credential forms before it
        self.build_context = build
        #: an error in the route's own shape (a front door's dialect); None: the vendorA envelope as it is
        self.error_shape = error_shape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ex = Exchange(RequestRecord("", self.endpoint, time.perf_counter()))
        flow = self.flow
        try:
            try:
                body, request, node = await self._admit(ex, scope, receive)
                outcome = await flow.run(self, ex, body, request, node)
            except ClientDisconnected:
                ex.record.status = 499
                ex.record.error = "client disconnected before sending its body"
                self.finish(ex)
                return
            except Exception as exc:  # noqa: BLE001 - every failure gets the one error format
                await self.fail(ex, send, exc if isinstance(exc, GatewayError) else internal_error(exc))
                return
            await flow.respond(self, ex, receive, send, outcome)
        except asyncio.CancelledError:
            if not ex.record.total_s:  # not finished: the handler dropped mid-request still leaves its record
                self._dropped(ex)
            raise
        finally:
            if ex.form is not None:  # a multipart request's spooled files, however it ended
                ex.form.close()

    async def _admit(self, ex: Exchange, scope: Scope, receive: Receive) -> tuple[bytes, Any, Node]:
        """The caller's key, the body, the config (a prompt template rendered into the body when one is named), the
        decoded request, its routing tree, and the policies' admission."""
        parts = self.parts
        record = ex.record
        ex.ctx = ctx = self.build_context(scope["headers"])
        record.trace_id = ctx.trace_id
        # no gateway key: an in-process request (a batch line) carries its key record in the scope
        key = parts.keys.known(ctx.api_key) if ctx.api_key else scope.get(IN_PROCESS_KEY)
        if key is None or not key.can_infer or self.prompt_route:
            key = await authenticate(parts.keys, ctx, self.scope, record=None if ctx.api_key else key)
        ctx.workspace = record.workspace = key.workspace
        form = self.form
        body = await read_request_body(scope, receive, parts.max_body_bytes) if form is None else b""
        body, config = await self._config(ctx, key, scope, body)
        if form is not None:  # read once the config is known: its files are hashed only when it caches
            body = await form.read(self, ex, scope, receive, config)
        request = self.parse(body)
        record.stream = bool(getattr(request, "stream", False))
        record.model = getattr(request, "model", None)
        node = parts.planner.plan(config)
        if parts.policies.may_apply(ctx.workspace):  # a dict lookup unless the workspace has policies
            record.budget = await parts.policies.admit(ctx, request, len(body), node)
        return body, request, node

    async def _config(self, ctx: RequestContext, key: KeyRecord, scope: Scope, body: bytes) -> tuple[bytes, Config]:
        resolver = self.parts.resolver
        records = self.parts.records
        if self.prompt_route:
            return await prompted.route_inputs(resolver, records, ctx, body, scope["path_params"]["prompt_id"])
        try:
            config = resolver.resolve(ctx, records)
        except RecordsNeeded:
            config = await prompted.resolve(resolver, records, ctx)
        if config.prompt_id is not None:  # renders a template: the scope the prompt routes need
            if PROMPTS_RUN not in key.scopes:
                raise missing_scope(PROMPTS_RUN)
            return await prompted.config_prompt(resolver, records, ctx, body, config, self.endpoint)
        return body, config

    async def fail(self, ex: Exchange, send: Send, error: GatewayError) -> None:
        """Answer ``error`` (in the route's shape) with the gateway's headers, and log the request."""
        if self.error_shape is not None:
            error = self.error_shape(error)
        record = ex.record
        record.status = error.status
        record.error = error.message
        self.finish(ex)
        ctx = ex.ctx
        # a gateway header that does not parse leaves no context: the cache status still goes out
        headers = (gateway_headers(ctx.trace_id, record.provider, record.cache_status, ex.state) if ctx is not None
                   else [CACHE_STATUS[record.cache_status]])
        if ex.steps is not None and ex.steps.held:
            headers.extend(ex.steps.response_headers())
        await send_error(send, error, headers)

    def _dropped(self, ex: Exchange) -> None:
        """The record of a request whose handler was cancelled before it ended (the worker stopping, a WebSocket
        session closing its in-process turns): 499 with the reason, its policy hold settled to what it used."""
        record = ex.record
        record.status = 499
        record.error = record.error or DROPPED_ERROR
        self.finish(ex)

    def finish(self, ex: Exchange, response_body: bytes | None = None) -> None:
        """The request's record completed from its exchange and handed to the recorder (or the steps' hooks)."""
        record = ex.record
        ctx = ex.ctx
        state = ex.state
        record.total_s = time.perf_counter() - record.started
        if ctx is not None:
            record.metadata = ctx.metadata or None
            record.span_id = ctx.span_id
            record.parent_span_id = ctx.parent_span_id
            record.span_name = ctx.span_name
            record.sensitive_headers = ctx.sensitive_headers
            record.request_headers = ctx.raw_headers
        if state is not None:
            record.retries = state.retries
            record.fallbacks = state.fallbacks
            record.breaker_opens = state.breaker_opens
            record.target_path = state.path
        parts = self.parts
        if record.budget is not None:
            parts.policies.finish(record.budget, record)
        if parts.log_bodies:
            from gateway.observability.entry import attach_bodies

            attach_bodies(record, state, response_body)
        if record.hooks is not None:  # the cache and guardrail steps store the answer and may delay the log line
            record.hooks.finish(record, parts.recorder)
        else:
            parts.recorder.record(record)


class UnifiedFlow:
    """The chat flow: the attempts the routing tree calls for, each answer turned into the unified format, written
    as JSON or relayed as SSE by ``relay`` (a front door hands in its dialect's relay)."""

    __slots__ = ("relay",)

    def __init__(self, relay: Callable[[StreamOutcome, RequestRecord], StreamRelay] = StreamRelay) -> None:
        self.relay = relay

    async def run(self, pipeline: Pipeline, ex: Exchange, body: bytes, request: Any, node: Node
                  ) -> JsonOutcome | StreamOutcome:
        """The attempts the routing tree calls for, with the node's steps around each, then the answer's steps."""
        ctx = ex.ctx
        assert ctx is not None
        record = ex.record
        params_cache: list[dict] = []

        def params() -> dict:
            if not params_cache:
                params_cache.append(_json_decode(body))
            return params_cache[0]

        ex.state = state = RunState(ctx.request_timeout, ctx.metadata, params)
        steps = None
        if node.tree_has_steps:  # a cache or guardrails somewhere in the config (else nothing is made)
            ex.steps = steps = pipeline.parts.steps().for_request(ctx, pipeline.endpoint, request, record.stream,
                                                                  record)
        attempt = Attempt(pipeline, ctx, body, request, record, params, steps)
        router = pipeline.parts.router
        if needs_router(node, state, router.default_timeout_ms):
            outcome = await router.run(node, attempt, state)
        else:
            state.attempts = 1
            outcome = await attempt(node)
        if steps is not None:
            dropped = outcome.dropped
            outcome = await steps.answered(outcome)
            outcome.dropped = dropped  # a held stream comes back as a new outcome
        return outcome

    async def respond(self, pipeline: Pipeline, ex: Exchange, receive: Receive, send: Send,
                      outcome: JsonOutcome | StreamOutcome) -> None:
        record = ex.record
        ctx = ex.ctx
        assert ctx is not None
        record.provider = outcome.provider
        headers = gateway_headers(ctx.trace_id, outcome.provider, record.cache_status, ex.state)
        if ex.steps is not None and ex.steps.held:
            headers.extend(ex.steps.response_headers())
        if outcome.dropped is not None:
            headers.append((DROPPED_HEADER, outcome.dropped))
        if ex.headers is not None:
            headers.extend(ex.headers)
        if isinstance(outcome, JsonOutcome):
            record.status = outcome.status
            usage = outcome.usage
            if usage is not None:
                record.usage = usage
                record.usage_source = "reported"
            elif pipeline.endpoint in _TEXT_ENDPOINTS:
                record.answer = outcome.body
                record.usage_source = "estimated"
            record.model = outcome.model or record.model
            await send_json(send, outcome.status, outcome.body, headers)
            pipeline.finish(ex, outcome.body)
            return
        await self.relay(outcome, record).run(receive, send, headers)
        pipeline.finish(ex)


UNIFIED_FLOW = UnifiedFlow()


class Attempt:
    """One request's attempt at a routing node: the adapter builds the upstream request from the body (params
    rewritten for the node, the node's steps before it), the client sends it, the adapter turns the answer back."""

    __slots__ = ("parts", "endpoint", "parse", "ctx", "body", "request", "record", "params", "steps", "rewritten")

    def __init__(self, pipeline: Pipeline, ctx: RequestContext, body: bytes, request: Any, record: RequestRecord,
                 params: Callable[[], dict], steps: RequestSteps | None) -> None:
        self.parts = pipeline.parts
        self.endpoint = pipeline.endpoint
        self.parse = pipeline.parse
        self.ctx = ctx
        self.body = body
        self.request = request
        self.record = record
        self.params = params
        self.steps = steps
        self.rewritten: dict[int, tuple[bytes, Any]] = {}

    def target_adapter(self, node: Node) -> tuple[str, ProviderAdapter]:
        """The node's provider and its adapter; a node without one is a 400 naming its path."""
        provider = node.config.provider
        if not provider:
            raise InvalidRequest(f"{node.path} has no provider", param=f"{node.path}.provider")
        return provider, self.parts.providers.get(provider)

    async def __call__(self, node: Node) -> JsonOutcome | StreamOutcome:
        config = node.config
        provider, adapter = self.target_adapter(node)
        endpoint = self.endpoint
        adapter.check_endpoint(endpoint)
        body, request = self.body, self.request
        if needs_rewrite(config):
            body, request = self.rewritten_body(node)
        steps = self.steps
        if steps is not None:  # input checks, then the cache lookup
            new_body, cached = await steps.before_attempt(node, body, self.params if body is self.body else None)
            if cached is not None:  # made by this target from this body: it dropped the same fields
                if adapter.fields is not None:
                    cached.dropped = adapter.dropped_params(endpoint, config, body)
                return cached
            if new_body is not None:
                body, request = new_body, self.parse(new_body)
        stream = self.record.stream
        strip_usage = False
        if stream and adapter.asks_stream_usage and endpoint in _TEXT_ENDPOINTS:
            options = request.stream_options
            if options is None or not options.include_usage:
                body = with_stream_usage(body, options is not None)
                strip_usage = True
        self.record.request = request
        call = UpstreamCall(endpoint, config, body, request, stream, self.ctx, provider, strip_usage)
        return await self._send(adapter, call)

    def rewritten_body(self, node: Node) -> tuple[bytes, Any]:
        """The body with the node's params rewritten, and its decoded request (made once per node)."""
        hit = self.rewritten.get(id(node))
        if hit is None:
            new_body = _json_encode(rewrite(_json_decode(self.body), node.config))
            hit = self.rewritten[id(node)] = (new_body, self.parse(new_body))
        return hit

    async def _send(self, adapter: ProviderAdapter, call: UpstreamCall) -> JsonOutcome | StreamOutcome:
        """The unified request sent in the provider's wire format, its answer turned back into the unified one."""
        upstream_request = await adapter.build_request(call)
        dropped = adapter.dropped_params(call.endpoint, call.target, call.body) if adapter.fields is not None else None
        return await self.exchange(adapter, call, upstream_request, UNIFIED, dropped)

    async def exchange(self, adapter: ProviderAdapter, call: UpstreamCall, upstream_request: UpstreamRequest,
                        reader: AnswerReader, dropped: bytes | None = None) -> JsonOutcome | StreamOutcome:
        """Send ``upstream_request`` through the exchange and read its answer with ``reader``: a non-2xx answer
        raises the provider's error; a JSON answer is read whole, a stream up to its first events. An error on the
        way has the credentials the request carried masked (an upstream may echo them)."""
        config = call.target
        record = self.record
        stream = call.stream
        record.provider = call.provider
        record.upstream_started = time.perf_counter()
        exchange = self.parts.exchange
        response = await exchange.send(self.ctx, config, upstream_request, stream)
        if not 200 <= response.status < 300:
            raise await exchange.refused(response, adapter, call, upstream_request, config)
        try:
            if not stream:
                data = await response.read_body()
                record.upstream_s = time.perf_counter() - record.upstream_started
                return reader.json(adapter, call, response, data, dropped)
            transformer = reader.transformer(adapter, call)
            first, ended = await _first_events(response, transformer, call.provider)
            record.ttft_s = time.perf_counter() - record.started
            return StreamOutcome(response, transformer, first, call.provider, call.model, ended, dropped=dropped,
                                 sent=upstream_request, target=config)
        except GatewayError as error:
            response.close()
            masked(error, upstream_request, config)
            raise
        except BaseException:
            response.close()
            raise
        finally:
            if not stream:
                response.release()


class AnswerReader:
    """How an attempt reads a 2xx answer: a JSON body into a ``JsonOutcome``, a stream through a transformer. This
    one turns the provider's wire format into the unified one (the adapter's ``parse_response`` and ``stream``);
    a front door that forwards its dialect as sent reads the provider's own answer instead."""

    __slots__ = ()

    def json(self, adapter: ProviderAdapter, call: UpstreamCall, response: UpstreamResponse, data: bytes,
             dropped: bytes | None) -> JsonOutcome:
        result = adapter.parse_response(call, response.status, response.headers, data)
        return JsonOutcome(result.body, result.usage, result.model, call.provider, dropped=dropped)

    def transformer(self, adapter: ProviderAdapter, call: UpstreamCall) -> Any:
        return adapter.stream(call)


UNIFIED = AnswerReader()


async def _first_events(response: UpstreamResponse, transformer: Any, provider: str) -> tuple[list[bytes], bool]:
    """Read until the transformer yields its first events; also says whether the upstream stream ended."""
    read = response.read_some
    while True:
        try:
            chunk = await read()
        except response.read_errors as exc:
            raise stream_broke(exc, response, provider, "before its first event") from None
        if not chunk:
            return transformer.close(), True
        events = transformer.feed(chunk)
        if events:
            return events, False
