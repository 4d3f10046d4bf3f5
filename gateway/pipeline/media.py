"""The images and audio routes: the inference pipeline with a multipart body in and a relayed answer out.

``POST /v1/images/generations`` and ``/v1/audio/speech`` take JSON; ``/v1/images/edits``, ``/variations`` and
``/v1/audio/transcriptions``, ``/translations`` take multipart forms, received as they stream (files spooled to
disk, ``media_form.py``). Admission is the pipeline's (key, config, policies: rate limits count these requests),
and so is routing (fallback, retries, breakers, timeouts). Each attempt sends the body to a provider that serves
the route in vendorA's wire format (the adapter's URL and auth; a provider without it answers 400 naming it), and
a 2xx answer is relayed as it arrives, whatever it is (JSON with base64 images, text, SRT, an audio file, SSE),
with its content type and never decoded: ``media_meter.py`` reads the usage, image count or audio seconds off the
passing bytes. An error status before the answer starts is the provider's error, which retries and fallbacks act
on. Input guardrails see the prompt (images, transcriptions) or the text to speak; output guardrails do not apply
(answers are relayed, not held). The response cache keeps an answer's bytes as they pass and answers a repeat with
them (``media_cache.py``); a multipart form is read once the config is known, so its files are hashed for the
cache key only when the config caches. The user's view: docs/images-and-audio.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import msgspec

from gateway.http.disconnect import DisconnectWatch
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.http.respond import end_stream, gateway_headers, send_chunk
from gateway.http.types import Receive, Scope, Send
from gateway.observability.record import RequestRecord
from gateway.pipeline.media_cache import AnswerCollector, CachedMedia, MediaCache, sse_events, tree_caches
from gateway.pipeline.media_form import MediaForm, receive_form
from gateway.pipeline.media_meter import MediaMeter
from gateway.pipeline.outcome import stream_broke
from gateway.pipeline.pipeline import Attempt, Exchange, Pipeline, PipelineParts
from gateway.providers.base import ProviderAdapter, UpstreamCall
from gateway.routing.execute import RunState, needs_router
from gateway.routing.params import needs_rewrite
from gateway.routing.plan import Node
from gateway.schema.config import Config
from gateway.upstream.exchange import masked
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse

if TYPE_CHECKING:  # a type only: the guardrails load when a request first needs them
    from gateway.pipeline.guardrail_step import GuardrailStep

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode
#: the largest piece of a whole document (JSON, text) held before it is sent on
COALESCE_BYTES = 1024 * 1024
#: answers sent on read by read: audio and event streams
_AS_IT_COMES = ("audio/", "text/event-stream", "application/octet-stream")


class FormLimits:
    """A multipart route's limits: the file size (``GATEWAY_FILE_MAX_BYTES``), where files are spooled, and the
    file part the route requires (``image``, ``file``)."""

    __slots__ = ("max_file_bytes", "spool_dir", "required")

    def __init__(self, max_file_bytes: int, spool_dir: str | None, required: str) -> None:
        self.max_file_bytes = max_file_bytes
        self.spool_dir = spool_dir
        self.required = required


class RawOutcome:
    """A 2xx upstream answer whose body is still to be read: relayed as it arrives; or, from an adapter that
    translates the route (``relays_media`` False), the translated ``body`` (the response already released); with
    the ``cache`` that stores it and its ``collector`` when the answer is to be stored."""

    __slots__ = ("response", "provider", "model", "body", "cache", "collector")

    def __init__(self, response: UpstreamResponse, provider: str, model: str | None,
                 body: bytes | None = None) -> None:
        self.response = response
        self.provider = provider
        self.model = model
        self.body = body
        self.cache: MediaCache | None = None
        self.collector: AnswerCollector | None = None


class FormBody:
    """A multipart route's body (``Pipeline.form``): the form received once the config is known (its files hashed
    for the cache key only when the config caches), kept on the exchange (closed when the request ends), and the
    file part the route requires checked."""

    __slots__ = ("limits",)

    def __init__(self, limits: FormLimits) -> None:
        self.limits = limits

    async def read(self, pipeline: Pipeline, ex: Exchange, scope: Scope, receive: Receive, config: Config) -> bytes:
        limits = self.limits
        hashed = tree_caches(pipeline.parts.planner.plan(config))  # the files' digests are for the cache key only
        ex.form = form = await receive_form(scope, receive, limits.max_file_bytes, limits.spool_dir, hashed)
        required = limits.required
        if not any(name in (required, required + "[]") for name in form.file_names()):
            raise InvalidRequest(f"{required} is required (a multipart part named '{required}' with a filename)",
                                 param=required)
        return form.body()


class MediaFlow:
    """The images and audio flow: attempts that send the body (JSON or a new multipart body) and keep a 2xx answer
    unread, then the answer relayed as it arrives (or a cache hit replayed)."""

    __slots__ = ()

    async def respond(self, pipeline: Pipeline, ex: Exchange, receive: Receive, send: Send,
                      outcome: RawOutcome | CachedMedia) -> None:
        if isinstance(outcome, CachedMedia):
            await self._replay(pipeline, ex, send, outcome)
        else:
            await self._relay(pipeline, ex, receive, send, outcome)

    async def run(self, pipeline: Pipeline, ex: Exchange, body: bytes, request: Any, node: Node
                  ) -> RawOutcome | CachedMedia:
        form: MediaForm | None = ex.form
        ctx = ex.ctx
        assert ctx is not None
        params_cache: list[dict] = []

        def params() -> dict:
            if not params_cache:
                params_cache.append(_json_decode(body))
            return params_cache[0]

        ex.state = state = RunState(ctx.request_timeout, ctx.metadata, params)
        guard = cache = None
        if node.tree_has_steps:  # a cache or guardrails somewhere in the config
            # the request's steps write its log line (with hook_results, once async items are done); their
            # guardrail step acts on these routes, and their cache step through MediaCache
            steps = pipeline.parts.steps().for_request(ctx, pipeline.endpoint, request, ex.record.stream, ex.record)
            guard = steps.guard
            cache = MediaCache(steps.cache)
        attempt = MediaAttempt(pipeline, ctx, body, request, ex.record, params, form, guard, cache)
        router = pipeline.parts.router
        if needs_router(node, state, router.default_timeout_ms):
            outcome = await router.run(node, attempt, state)
        else:
            state.attempts = 1
            outcome = await attempt(node)
        assert isinstance(outcome, (RawOutcome, CachedMedia))
        if isinstance(outcome, RawOutcome) and cache is not None:
            outcome.collector = cache.collector()
            outcome.cache = cache
        return outcome

    async def _relay(self, pipeline: Pipeline, ex: Exchange, receive: Receive, send: Send, outcome: RawOutcome
                     ) -> None:
        """Send the answer on as it arrives; the record gets what the meter counted."""
        record = ex.record
        ctx = ex.ctx
        assert ctx is not None
        response = outcome.response
        record.provider = outcome.provider
        record.model = outcome.model or record.model
        record.status = response.status
        content_type = ("application/json" if outcome.body is not None
                        else response.headers.get("content-type") or "application/octet-stream")
        headers = gateway_headers(ctx.trace_id, outcome.provider, record.cache_status, ex.state)
        headers.append((b"content-type", content_type.encode("latin-1")))
        collector = outcome.collector
        meter = MediaMeter(pipeline.endpoint, content_type, getattr(record.request, "response_format", None))
        task = asyncio.current_task()
        assert task is not None  # ASGI calls run in a task
        watch = DisconnectWatch(receive, task)
        try:
            await send({"type": "http.response.start", "status": response.status, "headers": headers})
            # a whole document (JSON, text) goes out in pieces of up to COALESCE_BYTES (fewer sends); audio and
            # SSE go out read by read
            coalesce = 0 if content_type.startswith(_AS_IT_COMES) else COALESCE_BYTES
            pending: list[bytes] = []
            size = 0
            if outcome.body is not None:
                meter.feed(outcome.body)
                pending.append(outcome.body)
                if collector is not None:
                    collector.feed(outcome.body)
            try:
                async for piece in self._pieces(outcome):
                    if record.ttft_s is None:
                        record.ttft_s = time.perf_counter() - record.started
                    meter.feed(piece)
                    if collector is not None:
                        collector.feed(piece)
                    if coalesce:
                        pending.append(piece)
                        size += len(piece)
                        if size < coalesce:
                            continue
                        piece = b"".join(pending)
                        pending.clear()
                        size = 0
                    await send_chunk(send, piece)
            except response.read_errors as exc:
                broken = stream_broke(exc, response, outcome.provider)  # the status is out: the body ends short
                record.status = broken.status
                record.error = broken.message
            if collector is not None and outcome.cache is not None and record.error is None:
                # stored before the last byte leaves: the client's next request finds it
                await outcome.cache.store(collector, content_type, outcome.provider, record.model)
            await end_stream(send, b"".join(pending))
        except asyncio.CancelledError:
            self._left(record, response)
            if not watch.fired():
                raise
            task.uncancel()
        except OSError:
            self._left(record, response)
        finally:
            watch.stop()
            response.release()
            record.upstream_s = time.perf_counter() - record.upstream_started
            record.usage, record.usage_source = meter.result()
            pipeline.finish(ex)

    async def _replay(self, pipeline: Pipeline, ex: Exchange, send: Send, hit: CachedMedia) -> None:
        """Answer a cache hit: the stored bytes with their content type (an SSE answer event by event)."""
        record = ex.record
        ctx = ex.ctx
        assert ctx is not None
        record.provider = hit.provider
        record.model = hit.model or record.model
        record.status = 200
        answer = hit.answer
        headers = gateway_headers(ctx.trace_id, hit.provider, record.cache_status, ex.state)
        headers.append((b"content-type", answer.content_type.encode("latin-1")))
        body = answer.body
        if answer.content_type.startswith("text/event-stream"):
            pieces = sse_events(body)
        else:
            pieces = [body[i:i + COALESCE_BYTES] for i in range(0, len(body), COALESCE_BYTES)]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            record.ttft_s = time.perf_counter() - record.started
            for piece in pieces[:-1]:
                await send_chunk(send, piece)
            await end_stream(send, pieces[-1] if pieces else b"")
        except OSError:
            record.status = 499
            record.error = "client disconnected"
        finally:
            pipeline.finish(ex)

    @staticmethod
    async def _pieces(outcome: RawOutcome) -> AsyncIterator[bytes]:
        if outcome.body is None:
            async for piece in outcome.response.chunks():
                yield piece

    @staticmethod
    def _left(record: RequestRecord, response: UpstreamResponse) -> None:
        record.status = 499
        record.error = "client disconnected"
        response.close()


class MediaAttempt:
    """One attempt at a node: the body (params rewritten, input guardrails run) sent as JSON or as a new multipart
    body of the form's fields and spooled files; a 2xx answer comes back unread. The request's parts (its body,
    adapter choice and rewrites) are the chat attempt's (``base``)."""

    __slots__ = ("base", "form", "guard", "cache")

    def __init__(self, pipeline: Pipeline, ctx: Any, body: bytes, request: Any, record: RequestRecord,
                 params: Callable[[], dict], form: MediaForm | None, guard: GuardrailStep | None,
                 cache: MediaCache | None) -> None:
        self.base = Attempt(pipeline, ctx, body, request, record, params, None)
        self.form = form
        self.guard = guard
        self.cache = cache

    async def __call__(self, node: Node) -> RawOutcome | CachedMedia:
        base = self.base
        config = node.config
        provider, adapter = base.target_adapter(node)
        adapter.check_endpoint(base.endpoint)
        body, request = base.body, base.request
        if needs_rewrite(config):
            body, request = base.rewritten_body(node)
        guard = self.guard
        doc = None
        if guard is not None and node.has_steps:
            doc = base.params() if body is base.body else _json_decode(body)
            redacted = await guard.before(node, doc)
            if redacted is not None:
                doc = redacted
                body = _json_encode(redacted)
                request = base.parse(body)
        if self.cache is not None:  # the body as sent upstream is the key's (input checks ran first)
            if doc is None and node.config.cache is not None:
                doc = base.params() if body is base.body else _json_decode(body)
            hit = await self.cache.lookup(node, doc or {}, bool(getattr(request, "stream", False)), self.form)
            if hit is not None:
                return hit
        base.record.request = request
        return await self._send(adapter, UpstreamCall(base.endpoint, config, body, request, base.record.stream,
                                                      base.ctx, provider))

    async def _send(self, adapter: ProviderAdapter, call: UpstreamCall) -> RawOutcome:
        """The call sent (a multipart body rebuilt from the form), a 2xx answer kept unread, or translated and read
        whole by an adapter that does not relay media."""
        base = self.base
        config = call.target
        provider = call.provider
        record = base.record
        upstream = await adapter.build_request(call)
        if self.form is not None:
            headers = {k: v for k, v in upstream.headers.items() if k != "content-type"}
            payload: Any = self.form.payload(_json_decode(call.body))
            upstream = UpstreamRequest(upstream.url, headers, payload, upstream.method)
        record.provider = provider
        record.upstream_started = time.perf_counter()
        exchange = base.parts.exchange
        response = await exchange.send(base.ctx, config, upstream, stream=True)
        if not 200 <= response.status < 300:
            raise await exchange.refused(response, adapter, call, upstream, config)
        if adapter.relays_media:
            return RawOutcome(response, provider, call.model)
        try:
            try:
                data = await response.read_body()
            finally:
                response.release()
            result = adapter.parse_response(call, response.status, response.headers, data)
        except GatewayError as error:
            masked(error, upstream, config)
            raise
        return RawOutcome(response, provider, result.model or call.model, result.body)


MEDIA_FLOW = MediaFlow()


def media_pipeline(parts: PipelineParts, endpoint: str, parse: Callable[[bytes], Any],
                   form: FormLimits | None = None) -> Pipeline:
    """One images or audio route: the pipeline with the media flow, and a multipart body when ``form`` is given."""
    return Pipeline(parts, endpoint, parse, flow=MEDIA_FLOW, form=FormBody(form) if form is not None else None)


def media_routes(parts: PipelineParts, settings: Any) -> list[tuple[str, str, Pipeline]]:
    """The images and audio routes of a worker (``settings`` gives the file limit and the spool directory)."""
    from gateway.providers import base
    from gateway.schema import media
    from gateway.settings import data_path

    spool = data_path(settings, "tmp")
    spool.mkdir(parents=True, exist_ok=True)

    def form(required: str) -> FormLimits:
        return FormLimits(settings.file_max_bytes, str(spool), required)

    return [
        ("POST", "/v1/images/generations",
         media_pipeline(parts, base.IMAGES_GENERATIONS, media.parse_image_generation)),
        ("POST", "/v1/images/edits", media_pipeline(parts, base.IMAGES_EDITS, media.parse_image_edit, form("image"))),
        ("POST", "/v1/images/variations",
         media_pipeline(parts, base.IMAGES_VARIATIONS, media.parse_image_variation, form("image"))),
        ("POST", "/v1/audio/transcriptions",
         media_pipeline(parts, base.AUDIO_TRANSCRIPTIONS, media.parse_transcription, form("file"))),
        ("POST", "/v1/audio/translations",
         media_pipeline(parts, base.AUDIO_TRANSLATIONS, media.parse_transcription, form("file"))),
        ("POST", "/v1/audio/speech", media_pipeline(parts, base.AUDIO_SPEECH, media.parse_speech)),
    ]
