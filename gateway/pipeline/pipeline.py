"""The inference pipeline shared by chat, completions, embeddings, moderations and rerank.

context -> auth -> body -> config (a prompt template rendered into the body when the config or the route names
one) -> body decoded once -> routing tree -> attempts (adapter builds, upstream client sends, adapter turns the
answer back) -> JSON or SSE out with the x-gateway-* response headers. A stream's first event is read before the
status is committed, so an in-band error becomes a real status that retries and fallbacks act on.

Usage is counted on every path: a vendorA-wire upstream streaming chat or completions is always asked for its usage
chunk (``stream_options.include_usage``), which is stripped again before it reaches a client that did not ask for
it; a stream the client leaves is logged as 499, one that breaks off as the error it ended with, both with the usage
so far (the provider's, else the gateway's estimate). Each record says where its tokens come from (usage_source).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import aiohttp
import msgspec

from gateway.controlplane.directory import RecordsNeeded
from gateway.controlplane.keys import IN_PROCESS_KEY, KeyRecord, missing_scope
from gateway.http.body import ClientDisconnected, read_request_body
from gateway.http.context import RequestContext, build_context
from gateway.http.disconnect import DisconnectWatch
from gateway.http.errors import GatewayError, InvalidRequest, Unauthorized, internal_error
from gateway.http.respond import end_stream, send_chunk, send_error, send_json, start_stream
from gateway.http.types import RawHeaders, Receive, Scope, Send
from gateway.observability.estimate import HEAD_BYTES
from gateway.observability.record import RequestRecord
from gateway.pipeline import prompted
from gateway.pipeline.outcome import JsonOutcome, StreamOutcome, held_error, stream_broke
from gateway.providers.base import CHAT, COMPLETIONS, UpstreamCall
from gateway.providers.vendorA import VendorAAdapter
from gateway.routing.execute import RunState, needs_router
from gateway.routing.params import needs_rewrite, rewrite
from gateway.routing.plan import Node
from gateway.runtime import Runtime
from gateway.upstream.client import read_response_body

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode
DONE = b"data: [DONE]\n\n"
#: endpoints whose answers are text, counted in tokens (and estimated when the provider reports none)
_TEXT_ENDPOINTS = frozenset({CHAT, COMPLETIONS})
_USAGE_OPTION = b'{"stream_options":{"include_usage":true},'
#: the fields the answering target did not send upstream (see gateway/providers/fields.py)
DROPPED_HEADER = b"x-gateway-dropped-params"
PROMPTS_RUN = "prompts.run"


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


def error_event(error: GatewayError) -> bytes:
    """An in-stream error: ``data: {"error": {...}}``, the form vendorA SDKs raise on."""
    return b"data: " + error.body() + b"\n\n"


async def authenticate(runtime: Runtime, ctx: RequestContext, scope: str | None = None,
                       record: KeyRecord | None = None) -> KeyRecord:
    """The caller's key record (``record`` when already known; its workspace set on ``ctx``): 401 without a known
    ``x-gateway-api-key``, 403 when ``scope`` is given and the key lacks it. Never blocks the event loop."""
    if record is None:
        key = ctx.api_key
        if not key:
            raise Unauthorized("missing gateway key: send x-gateway-api-key", param="x-gateway-api-key")
        record = await runtime.keys.lookup(key)
        if record is None:
            raise Unauthorized("unknown or revoked gateway key", param="x-gateway-api-key")
    if scope is not None and scope not in record.scopes:
        raise missing_scope(scope)
    ctx.workspace = record.workspace
    return record


_RETRY_COUNTS = [str(n).encode() for n in range(16)]


#: x-gateway-cache-status values (HIT, SEMANTIC_HIT, MISS, REFRESH, DISABLED) as header pairs
_CACHE_STATUS = {name: (b"x-gateway-cache-status", name.encode())
                 for name in ("HIT", "SEMANTIC_HIT", "MISS", "REFRESH", "DISABLED")}


def response_headers(ctx: RequestContext, state: RunState | None, provider: str | None,
                     cache_status: str = "DISABLED") -> RawHeaders:
    headers = [(b"x-gateway-trace-id", ctx.trace_id.encode("latin-1")), _CACHE_STATUS[cache_status]]
    if state is not None:
        headers.append((b"x-gateway-last-used-option-index", state.path.encode()))
        retries = state.retries
        headers.append((b"x-gateway-retry-attempt-count",
                        _RETRY_COUNTS[retries] if retries < 16 else str(retries).encode()))
    if provider:
        headers.append((b"x-gateway-provider", provider.encode()))
    return headers


class Pipeline:
    """One endpoint's handler: ``endpoint`` name and the body parser for it."""

    def __init__(self, runtime: Runtime, endpoint: str, parse: Callable[[bytes], Any], prompt_route: bool = False,
                 scope: str = "inference") -> None:
        self.runtime = runtime
        self.endpoint = endpoint
        self.parse = parse
        #: ``POST /v1/prompts/{prompt_id}/completions``: the body is a render body for that prompt
        self.prompt_route = prompt_route
        self.scope = scope

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self.runtime
        started = time.perf_counter()
        ctx: RequestContext | None = None
        state: RunState | None = None
        steps = None
        record = RequestRecord("", self.endpoint, started)
        try:
            ctx = build_context(scope["headers"])
            record.trace_id = ctx.trace_id
            # no gateway key: an in-process request (a batch line) carries its key record in the scope
            key = runtime.keys.known(ctx.api_key) if ctx.api_key else scope.get(IN_PROCESS_KEY)
            if key is None or not key.can_infer or self.prompt_route:
                key = await authenticate(runtime, ctx, self.scope, None if ctx.api_key else key)
            ctx.workspace = record.workspace = key.workspace
            body = await read_request_body(scope, receive, runtime.settings.max_body_bytes)
            records = runtime.records
            resolver = runtime.resolver
            if self.prompt_route:
                body, config = await prompted.route_inputs(resolver, records, ctx, body,
                                                           scope["path_params"]["prompt_id"])
            else:
                try:
                    config = resolver.resolve(ctx, records)
                except RecordsNeeded:
                    config = await prompted.resolve(resolver, records, ctx)
                if config.prompt_id is not None:  # renders a template: the scope the prompt routes need
                    if PROMPTS_RUN not in key.scopes:
                        raise missing_scope(PROMPTS_RUN)
                    body, config = await prompted.config_prompt(resolver, records, ctx, body, config, self.endpoint)
            request = self.parse(body)
            stream = bool(getattr(request, "stream", False))
            record.stream = stream
            record.model = getattr(request, "model", None)
            node = runtime.planner.plan(config)
            if runtime.policies.may_apply(ctx.workspace):  # a dict lookup unless the workspace has policies
                record.budget = await runtime.policies.admit(ctx, request, len(body), node)
            params_cache: list[dict] = []

            def params() -> dict:
                if not params_cache:
                    params_cache.append(_json_decode(body))
                return params_cache[0]

            state = RunState(ctx.request_timeout, ctx.metadata, params)
            if node.tree_has_steps:  # a cache or guardrails somewhere in the config (else nothing is made)
                steps = runtime.steps.for_request(ctx, self.endpoint, request, stream, record)
            attempt = self._attempt_fn(ctx, body, request, stream, record, params, steps)
            if needs_router(node, state, runtime.router.default_timeout_ms):
                outcome = await runtime.router.run(node, attempt, state)
            else:
                state.attempts = 1
                outcome = await attempt(node)
            if steps is not None:
                dropped = outcome.dropped
                outcome = await steps.answered(outcome)
                outcome.dropped = dropped  # a held stream comes back as a new outcome
        except ClientDisconnected:
            record.status = 499
            record.error = "client disconnected before sending its body"
            self._finish(record, ctx, state, started)
            return
        except Exception as exc:  # noqa: BLE001 - every failure gets the one error format
            error = exc if isinstance(exc, GatewayError) else internal_error(exc)
            record.status = error.status
            record.error = error.message
            self._finish(record, ctx, state, started)
            # a gateway header that does not parse leaves no context: the cache status still goes out
            headers = (response_headers(ctx, state, record.provider, record.cache_status) if ctx is not None
                       else [_CACHE_STATUS[record.cache_status]])
            if steps is not None and steps.held:
                headers.extend(steps.response_headers())
            await send_error(send, error, headers)
            return
        record.provider = outcome.provider
        headers = response_headers(ctx, state, outcome.provider, record.cache_status)
        if steps is not None and steps.held:
            headers.extend(steps.response_headers())
        if outcome.dropped is not None:
            headers.append((DROPPED_HEADER, outcome.dropped))
        if isinstance(outcome, JsonOutcome):
            record.status = outcome.status
            usage = outcome.usage
            if usage is not None:
                record.usage = usage
                record.usage_source = "reported"
            elif self.endpoint in _TEXT_ENDPOINTS:
                record.answer = outcome.body
                record.usage_source = "estimated"
            record.model = outcome.model or record.model
            await send_json(send, outcome.status, outcome.body, headers)
            self._finish(record, ctx, state, started, outcome.body)
            return
        await self._relay(receive, send, outcome, headers, record)
        self._finish(record, ctx, state, started)

    def _finish(self, record: RequestRecord, ctx: RequestContext | None, state: RunState | None,
                started: float, response_body: bytes | None = None) -> None:
        record.total_s = time.perf_counter() - started
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
        if record.budget is not None:
            self.runtime.policies.finish(record.budget, record)
        if self.runtime.settings.log_bodies:
            from gateway.observability.entry import attach_bodies

            attach_bodies(record, state, response_body)
        if record.hooks is not None:  # the cache and guardrail steps store the answer and may delay the log line
            record.hooks.finish(record, self.runtime.recorder)
        else:
            self.runtime.recorder.record(record)

    def _attempt_fn(self, ctx: RequestContext, body: bytes, request: Any, stream: bool, record: RequestRecord,
                    params: Callable[[], dict], steps: Any) -> Callable[[Node], Awaitable[JsonOutcome | StreamOutcome]]:
        runtime = self.runtime
        endpoint = self.endpoint
        parse = self.parse
        masked_headers = runtime.masked_headers
        rewritten: dict[int, tuple[bytes, Any]] = {}

        async def attempt(node: Node) -> JsonOutcome | StreamOutcome:
            config = node.config
            provider = config.provider
            if not provider:
                raise InvalidRequest(f"{node.path} has no provider", param=f"{node.path}.provider")
            adapter = runtime.providers.get(provider)
            adapter.check_endpoint(endpoint)
            call_body, call_request = body, request
            if needs_rewrite(config):
                hit = rewritten.get(id(node))
                if hit is None:
                    new_body = _json_encode(rewrite(_json_decode(body), config))
                    hit = (new_body, parse(new_body))
                    rewritten[id(node)] = hit
                call_body, call_request = hit
            if steps is not None:  # input checks, then the cache lookup
                new_body, cached = await steps.before_attempt(node, call_body, params if call_body is body else None)
                if cached is not None:  # made by this target from this body: it dropped the same fields
                    if adapter.fields is not None:
                        cached.dropped = adapter.dropped_params(endpoint, config, call_body)
                    return cached
                if new_body is not None:
                    call_body, call_request = new_body, parse(new_body)
            strip_usage = False
            if stream and endpoint in _TEXT_ENDPOINTS and isinstance(adapter, VendorAAdapter):
                options = call_request.stream_options
                if options is None or not options.include_usage:
                    call_body = with_stream_usage(call_body, options is not None)
                    strip_usage = True
            record.request = call_request
            call = UpstreamCall(endpoint, config, call_body, call_request, stream, ctx, provider)
            upstream_request = await adapter.build_request(call)
            dropped = adapter.dropped_params(endpoint, config, call_body) if adapter.fields is not None else None
            forwarded = ctx.forwarded(config.forward_headers, masked_headers)
            if forwarded:
                forwarded.update(upstream_request.headers)
                upstream_request.headers = forwarded
            record.provider = provider
            record.upstream_started = time.perf_counter()
            response = await runtime.client.open(upstream_request, stream)
            try:
                if not 200 <= response.status < 300:
                    data = await read_response_body(response)
                    raise adapter.parse_error(call, response.status, response.headers, data)
                if not stream:
                    data = await read_response_body(response)
                    record.upstream_s = time.perf_counter() - record.upstream_started
                    result = adapter.parse_response(call, response.status, response.headers, data)
                    return JsonOutcome(result.body, result.usage, result.model, provider, dropped=dropped)
                transformer = adapter.stream(call)
                if strip_usage:  # only vendorA-wire streams (VendorAStream) are asked for usage
                    transformer.strip_usage = True  # type: ignore[attr-defined]
                first, ended = await _first_events(response, transformer, provider)
                record.ttft_s = time.perf_counter() - record.started
                return StreamOutcome(response, transformer, first, provider, call.model, ended, dropped=dropped)
            except BaseException:
                response.close()
                raise
            finally:
                if not stream:
                    response.release()

        return attempt

    async def _relay(self, receive: Receive, send: Send, outcome: StreamOutcome, headers: RawHeaders,
                     record: RequestRecord) -> None:
        """Relay the stream event by event; a client that leaves cancels the upstream request.

        The record's status is what the stream came to: 200, the error it ended with (in-band or a broken
        upstream), or 499 when the client left. Its usage is the provider's figures when they arrived; otherwise
        the recorder estimates them from the chunks sent, kept here (see observability/estimate.py).
        """
        response = outcome.response
        transformer = outcome.transformer
        relay_task = asyncio.current_task()
        assert relay_task is not None  # ASGI calls run in a task
        watch = DisconnectWatch(receive, relay_task)
        record.status = outcome.status
        head: list[bytes] = []  # the chunks sent, up to HEAD_BYTES: the estimate counts their text exactly
        kept = rest_bytes = rest_events = 0  # past the head, only bytes and events are counted
        try:
            await start_stream(send, headers, outcome.status)
            if outcome.first:
                data = b"".join(outcome.first)
                await send_chunk(send, data)
                head.append(data)
                kept = len(data)
            tail = b""
            try:
                if not outcome.ended and held_error(transformer) is None:
                    async for chunk in response.content.iter_any():
                        out = transformer.feed(chunk)
                        if out:
                            data = b"".join(out)
                            await send_chunk(send, data)
                            if kept < HEAD_BYTES:
                                head.append(data)
                                kept += len(data)
                            else:
                                rest_bytes += len(data)
                                rest_events += data.count(b"\n\n")
                        if held_error(transformer) is not None:
                            response.close()  # the rest of this upstream stream is not wanted
                            break
                    else:
                        tail = b"".join(transformer.close())
                held = held_error(transformer)
                if held is not None:
                    raise held
            except GatewayError as error:
                record.status = error.status
                record.error = error.message
                await end_stream(send, tail + error_event(error) + DONE)
                head.append(tail)
                return
            except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
                broken = stream_broke(exc, outcome.provider)
                record.status = broken.status
                record.error = broken.message
                await end_stream(send, error_event(broken) + DONE)
                return
            if record.hooks is not None:  # the cache stores the answer before the last byte leaves
                await record.hooks.stream_ended(record)
            await end_stream(send, tail + DONE)
            head.append(tail)
        except asyncio.CancelledError:
            record.status = 499
            record.error = "client disconnected"
            response.close()
            if watch.fired():  # cancelled by our own disconnect watcher: the request is over, not the worker
                relay_task.uncancel()
                return
            raise
        except OSError:
            record.status = 499
            record.error = "client disconnected"
            response.close()
        finally:
            watch.stop()
            response.release()
            usage = transformer.usage
            if usage is not None:
                record.usage = usage
                record.usage_source = "reported"
            else:
                record.usage_source = "estimated"
                record.relayed_head = head
                record.relayed_rest_bytes = rest_bytes
                record.relayed_rest_events = rest_events


async def _first_events(response: aiohttp.ClientResponse, transformer: Any, provider: str
                        ) -> tuple[list[bytes], bool]:
    """Read until the transformer yields its first events; also says whether the upstream stream ended."""
    content = response.content
    while True:
        try:
            chunk = await content.readany()
        except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            raise stream_broke(exc, provider, "before its first event") from None
        if not chunk:
            return transformer.close(), True
        events = transformer.feed(chunk)
        if events:
            return events, False
