"""The steps around an upstream attempt when a config caches answers or runs hooks and guardrails.

Per attempt, on the body as it will be sent (params rewritten): the node's before-request hooks and input
guardrails (run once per request for the same items, whichever target inherits them; a deny ends the request with
446 and is never retried or fallen back from; a redaction rewrites the body), then the cache lookup (skipped with
``x-gateway-cache-force-refresh: true``): the exact key, then for ``mode: semantic`` the semantic step
(``gateway.cache.semantic``; its embedder and index are made at the worker's first semantic request). On the
answer: after-request hooks and output guardrails on the whole answer, ``hook_results`` added and the status set
(446 / 246 / 200), then the answer stored in the cache before the last byte of the response leaves (a JSON
answer before it is sent, a stream before its final ``[DONE]``), so the client's next request finds it.

Streams: a cached answer is replayed as SSE (``gateway.cache.stream``). An upstream stream flows event by event with
``hook_results`` in its first chunk, unless an output item can deny or redact: then the whole stream is read before
anything is sent (``x-gateway-stream-held: true`` says so), so a deny is a real 446 and a redaction reaches the
client. A flowing stream's output checks run once it has ended; their verdicts, the results of ``async`` items and
the feedback of every outcome go into the request's log line (``hook_results``), which is written when they are
done (at most ``LOG_WAIT_S`` later), never delaying the answer. A stream is cached only when it ended well.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import msgspec

from gateway.api.outcome import JsonOutcome, StreamOutcome
from gateway.api.stream_steps import AnswerTap, first_with, read_whole, replayed, with_usage
from gateway.cache.answers import CachedAnswer, ResponseCache, max_age_s
from gateway.cache.keys import partition, simple_key
from gateway.cache.prompt import SemanticPrompt
from gateway.cache.semantic import SemanticCache, semantic_partition, semantic_prompt
from gateway.cache.stream import StreamAssembler, replay, replayable
from gateway.guardrails import (
    FeedbackRecord,
    GuardrailAnswer,
    GuardrailRequest,
    GuardrailRunner,
    HookResult,
    HookResults,
    PhaseOutcome,
    attach_hook_results,
)
from gateway.guardrails.saved_cache import SavedGuardrailCache, guardrail_repository
from gateway.http.context import RequestContext
from gateway.http.errors import InvalidRequest
from gateway.observability.record import RequestRecord
from gateway.providers.base import CHAT, COMPLETIONS
from gateway.routing.plan import Node
from gateway.schema.config import CacheConfig, Config

if TYPE_CHECKING:
    from gateway.api.runtime import Runtime

log = logging.getLogger("gateway.guardrails")

_decode = msgspec.json.decode
_encode = msgspec.json.encode

#: the longest a request's log line waits for its async items and a flowed stream's output checks
LOG_WAIT_S = 65.0
#: request log lines waiting at once per worker; beyond it a line is written without waiting
DEFERRED_MAX = 1024
HELD_HEADER = (b"x-gateway-stream-held", b"true")
_STREAMED = frozenset({CHAT, COMPLETIONS})


class PipelineSteps:
    """Per worker: the response cache, the guardrail runner and the saved-guardrail cache (``Runtime.steps`` makes
    it when a request or route first needs it)."""

    def __init__(self, runtime: Runtime, embeddings: Config | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.runtime = runtime
        self.settings = settings = runtime.settings
        self.store = store = runtime.store
        self.clock = clock
        self.cache = ResponseCache(store, clock)
        self.saved = SavedGuardrailCache(guardrail_repository(store), lambda: runtime.records.box)
        runtime.watcher.subscribe(self.saved.invalidate)
        self.runner = GuardrailRunner(settings, runtime.client, resolve_saved=self.saved.resolve)
        self._deferred: set[asyncio.Task[None]] = set()
        self._semantic: SemanticCache | None = None
        #: the validated GATEWAY_SEMANTIC_CACHE_EMBEDDINGS config, None for the local model
        self._embeddings_config = embeddings

    @property
    def semantic(self) -> SemanticCache:
        """The semantic step, made on first use (the embedder loads its model at its first embedding)."""
        if self._semantic is None:
            settings = self.settings
            if self._embeddings_config is not None:
                from gateway.cache.provider_embedder import ProviderEmbedder

                embedder: Any = ProviderEmbedder(
                    self._embeddings_config, settings.semantic_cache_embedding_model, self.runtime,
                    capacity=settings.semantic_cache_threads + settings.semantic_cache_queue)
            else:
                from gateway.cache.embedder import LocalEmbedder

                embedder = LocalEmbedder(threads=settings.semantic_cache_threads, queue=settings.semantic_cache_queue)
            self._semantic = SemanticCache(self.store, embedder, settings.semantic_cache_threshold,
                                           settings.semantic_cache_max_entries, self.clock)
        return self._semantic

    def for_request(self, ctx: RequestContext, endpoint: str, request: Any, stream: bool,
                    record: RequestRecord) -> RequestSteps:
        steps = RequestSteps(self, ctx, endpoint, request, stream, record)
        record.hooks = steps
        return steps

    def record_later(self, steps: RequestSteps, record: RequestRecord, recorder: Any,
                     flowed: dict[str, Any] | None) -> None:
        """Write ``record`` once the request's async items (and a flowed stream's output checks) are done."""
        if len(self._deferred) >= DEFERRED_MAX:
            log.warning("request log line written without waiting for its guardrails: %d already waiting",
                        len(self._deferred))
            recorder.record(record)
            return
        task = asyncio.get_running_loop().create_task(steps.settle(record, recorder, flowed))
        self._deferred.add(task)
        task.add_done_callback(self._deferred.discard)

    async def close(self) -> None:
        """Stop async items (their requests' log lines are then written), then let cache writes finish."""
        await self.runner.close()
        if self._deferred:
            await asyncio.wait(set(self._deferred), timeout=5.0)
        await self.cache.drain()
        if self._semantic is not None:
            await self._semantic.close()


def declared(exc: InvalidRequest, node: Node) -> InvalidRequest:
    """``exc`` (raised for an item of ``node``'s hooks or guardrails, its ``param`` relative to the node, such as
    ``input_guardrails[1]``) with ``param`` and message naming the item's path in the whole config, where it is
    declared: the highest of the node's parents that holds the same (inherited) list, e.g.
    ``targets[1].input_guardrails[1]``. The path ``POST /v1/configs/validate`` names."""
    param = exc.param
    if not param or node.parent is None:
        return exc
    field = param.split("[", 1)[0].split(".", 1)[0]
    items = getattr(node.config, field, None)
    if items is None:
        return exc
    at = node
    while at.parent is not None and getattr(at.parent.config, field, None) is items:
        at = at.parent
    base = at.path.partition(".")[2]  # "config.targets[1]" -> "targets[1]"; the root "config" -> ""
    if not base:
        return exc
    full = f"{base}.{param}"
    return InvalidRequest(exc.message.replace(param, full, 1) if param in exc.message else exc.message, param=full)


class RequestSteps:
    """One request's cache and guardrail state (made only when its routing tree has a cache or guardrails)."""

    __slots__ = ("shared", "ctx", "endpoint", "request", "stream", "record", "results", "feedback", "background",
                 "async_results", "_before", "node", "view", "cache_key", "max_age", "hit", "answer_doc", "tap",
                 "held", "_semantic")

    def __init__(self, shared: PipelineSteps, ctx: RequestContext, endpoint: str, request: Any, stream: bool,
                 record: RequestRecord) -> None:
        self.shared = shared
        self.ctx = ctx
        self.endpoint = endpoint
        self.request = request
        self.stream = stream
        self.record = record
        self.results = HookResults()
        self.feedback: list[FeedbackRecord] = []
        #: (phase, task) of async items; their results once done
        self.background: list[tuple[str, asyncio.Task[HookResult | None]]] = []
        self.async_results: list[tuple[str, HookResult]] = []
        self._before: dict[tuple[int, int], PhaseOutcome] = {}
        self.node: Node | None = None
        self.view: GuardrailRequest | None = None
        self.cache_key: str | None = None
        self.max_age = 0
        self.hit = False
        self.answer_doc: Any = None
        self.tap: AnswerTap | None = None
        self.held = False
        #: (partition, prompt, vector or None) of a semantic request, to publish its entry with the answer
        self._semantic: tuple[bytes, SemanticPrompt, Any] | None = None

    # --- before the upstream call -------------------------------------------------------------------------------

    async def before_attempt(self, node: Node, body: bytes, decoded: Callable[[], dict] | None
                             ) -> tuple[bytes | None, JsonOutcome | StreamOutcome | None]:
        """Input checks, then the cache lookup, for one attempt at ``node``. Returns a replacement body (when a
        check redacted it) and the cached outcome on a hit; raises the 446 of a deny."""
        self.node = node
        self.cache_key = None
        self._semantic = None
        self.hit = False
        self.record.cache_status = "DISABLED"
        if not node.has_steps:
            return None, None
        config = node.config
        runner = self.shared.runner
        doc = decoded() if decoded is not None else _decode(body)
        new_body = None
        self.view = GuardrailRequest(doc, self.endpoint, metadata=self.ctx.metadata, headers=self.ctx.raw_headers,
                                     stream=self.stream, workspace=self.ctx.workspace or "default")
        if runner.has_before(config):
            key = (id(config.before_request_hooks), id(config.input_guardrails))
            phase = self._before.get(key)
            if phase is None:
                try:
                    phase = self._before[key] = await runner.before(config, self.view)
                except InvalidRequest as exc:
                    raise declared(exc, node) from None
                self._add(phase)
                if phase.deny:
                    raise self.results.denied()
            if phase.body is not None:
                doc = phase.body
                new_body = _encode(doc)
                self.view = GuardrailRequest(doc, self.endpoint, metadata=self.ctx.metadata,
                                             headers=self.ctx.raw_headers, stream=self.stream,
                                             workspace=self.ctx.workspace or "default")
        if config.cache is not None:
            return new_body, await self._lookup(node, config.cache, doc)
        return new_body, None

    async def _lookup(self, node: Node, cache: CacheConfig, doc: dict) -> JsonOutcome | StreamOutcome | None:
        config = node.config
        ctx = self.ctx
        self.max_age = max_age_s(cache.max_age)
        if not self.max_age:  # no answer is young enough to serve, and none is stored
            self.record.cache_status = "REFRESH" if ctx.cache_force_refresh else "MISS"
            return None
        part = partition(ctx.workspace or "default", ctx.cache_namespace, ctx.metadata)
        self.cache_key = simple_key(part, config, self.endpoint, doc)
        semantic = cache.mode == "semantic"
        if ctx.cache_force_refresh:
            self.record.cache_status = "REFRESH"
            if semantic:
                self._semantic_step(part, config, doc)
            return None
        self.record.cache_status = "MISS"
        found = await self.shared.cache.get(self.cache_key, self.max_age)
        status = "HIT"
        if found is None and semantic:
            found = await self._semantic_lookup(part, config, doc)
            status = "SEMANTIC_HIT"
        if found is None:
            return None
        return self._cached_outcome(found, status)

    def _semantic_step(self, part: bytes, config: Config, doc: dict) -> SemanticPrompt | None:
        prompt = semantic_prompt(self.endpoint, doc)
        if prompt is not None:
            cache = self.shared.semantic
            spart = semantic_partition(part, config, self.endpoint, doc, prompt, cache.model_id)
            self._semantic = (spart, prompt, None)
        return prompt

    async def _semantic_lookup(self, part: bytes, config: Config, doc: dict) -> CachedAnswer | None:
        prompt = self._semantic_step(part, config, doc)
        if prompt is None:
            return None
        assert self._semantic is not None
        spart = self._semantic[0]
        cache = self.shared.semantic
        read = cache.read_soon()  # the entries stored since the last read, read while the prompt is embedded
        vector = await cache.embed(prompt.text)
        if vector is None:
            return None
        self._semantic = (spart, prompt, vector)
        await cache.synced(read)
        key = cache.search(spart, vector, prompt.literals)
        return await self.shared.cache.get(key, self.max_age) if key is not None else None

    def _cached_outcome(self, found: CachedAnswer, status: str) -> JsonOutcome | StreamOutcome | None:
        if not self.stream:
            self._hit(status)
            return JsonOutcome(found.body, None, found.model, found.provider)
        try:
            answer = _decode(found.body)
        except msgspec.DecodeError:
            return None
        if self.endpoint not in _STREAMED or not replayable(answer, self.endpoint):
            return None
        self._hit(status)
        self.answer_doc = answer
        events = replay(answer, self.endpoint, self._include_usage())
        return replayed(events, found.provider, found.model)

    def _hit(self, status: str) -> None:
        self.hit = True
        self.record.cache_status = status

    def _include_usage(self) -> bool:
        options = getattr(self.request, "stream_options", None)
        return bool(options is not None and options.include_usage)

    def _add(self, phase: PhaseOutcome) -> None:
        self.results.add(phase)
        self.feedback.extend(phase.feedback)
        for task in phase.background:
            self.background.append((phase.phase, task))

    # --- on the answer ------------------------------------------------------------------------------------------

    async def answered(self, outcome: JsonOutcome | StreamOutcome) -> JsonOutcome | StreamOutcome:
        """Output checks on the answer (446 on a deny), its status and ``hook_results``; a stream that an output
        item may deny or redact is read whole first."""
        node = self.node
        runner = self.shared.runner
        after = node is not None and node.has_steps and runner.has_after(node.config)
        if isinstance(outcome, JsonOutcome):
            return await self._answered_json(outcome, after)
        if self.hit:
            return await self._answered_replay(outcome, after)
        try:
            hold = after and node is not None and self.view is not None and await runner.after_may_change(
                node.config, self.view)
        except InvalidRequest as exc:
            outcome.response.close()
            assert node is not None  # only a node's items raise it
            raise declared(exc, node) from None
        except BaseException:
            outcome.response.close()
            raise
        if hold:
            return await self._hold(outcome)
        if self.results.ran:
            outcome.first = first_with(outcome.first, self.results)
            outcome.status = self.results.status
        if self.cache_key is not None or after:
            tap = AnswerTap(outcome.transformer, StreamAssembler(self.endpoint))
            for event in outcome.first:
                tap.assembler.feed(event)
            tap.complete = outcome.ended
            outcome.transformer = tap
            self.tap = tap
        return outcome

    async def _answered_json(self, outcome: JsonOutcome, after: bool) -> JsonOutcome:
        body = outcome.body
        if after:
            phase = await self._after(GuardrailAnswer(json=_decode(body)))
            if phase.body is not None:
                outcome.body = _encode(phase.body)
        if self.cache_key is not None and not self.hit and outcome.status < 400:
            await self._store_now(self.shared.cache.entry(body, outcome.provider, outcome.model, self.max_age))
        if self.results.ran:
            outcome.body = attach_hook_results(outcome.body, self.results)
            outcome.status = self.results.status
        return outcome

    async def _after(self, answer: GuardrailAnswer) -> PhaseOutcome:
        assert self.node is not None and self.view is not None
        try:
            phase = await self.shared.runner.after(self.node.config, self.view, answer)
        except InvalidRequest as exc:
            raise declared(exc, self.node) from None
        self._add(phase)
        if phase.deny:
            raise self.results.denied()
        return phase

    async def _answered_replay(self, outcome: StreamOutcome, after: bool) -> StreamOutcome:
        if after:
            phase = await self._after(GuardrailAnswer(json=self.answer_doc))
            if phase.body is not None:
                outcome.first = replay(phase.body, self.endpoint, self._include_usage())
        if self.results.ran:
            outcome.first = first_with(outcome.first, self.results)
            outcome.status = self.results.status
        return outcome

    async def _hold(self, outcome: StreamOutcome) -> StreamOutcome:
        """Read the whole upstream stream, check it, and make it a replay of the events (or of the redacted
        answer)."""
        self.held = True
        events = await read_whole(outcome)
        transformer = outcome.transformer
        assembler = StreamAssembler(self.endpoint)
        for event in events:
            assembler.feed(event)
        doc = assembler.answer(whole=False)
        phase = await self._after(GuardrailAnswer(json=doc))
        if phase.body is not None:
            events = replay(phase.body, self.endpoint, self._include_usage())
        whole = with_usage(assembler.answer(), transformer.usage)
        if self.cache_key is not None and whole is not None and self.results.status < 400:
            await self._store_now(self.shared.cache.entry(_encode(whole), outcome.provider, outcome.model,
                                                          self.max_age))
        if self.results.ran:
            events = first_with(events, self.results)
        return replayed(events, outcome.provider, outcome.model, transformer.usage, self.results.status)

    def response_headers(self) -> list[tuple[bytes, bytes]]:
        return [HELD_HEADER] if self.held else []

    async def stream_ended(self, record: RequestRecord) -> None:
        """A relayed stream ended well: store its answer (called before its final ``[DONE]`` is sent)."""
        tap = self.tap
        if tap is None or not tap.complete or self.cache_key is None or self.hit or record.status >= 400:
            return
        whole = with_usage(tap.assembler.answer(), tap.usage)
        if whole is not None:
            await self._store_now(self.shared.cache.entry(_encode(whole), record.provider or "", record.model,
                                                          self.max_age))

    async def _store_now(self, entry: CachedAnswer) -> None:
        """Store ``entry`` under the request's key and publish a semantic request's entry; returns once both are
        in the store (a client that leaves meanwhile does not cut them)."""
        key = self.cache_key
        assert key is not None
        await self.shared.cache.put_now(key, entry, self._publisher(key, entry))

    # --- after the answer has gone --------------------------------------------------------------------------------

    def finish(self, record: RequestRecord, recorder: Any) -> None:
        """Start a flowed stream's output checks, and write the log line (now, or once the async items are
        done)."""
        if self.hit:  # a cached answer spent no tokens
            record.usage = None
            record.usage_source = "none"
            record.answer = None
            record.relayed_head = None
            record.relayed_rest_bytes = record.relayed_rest_events = 0
        flowed: dict[str, Any] | None = None
        tap = self.tap
        if tap is not None and tap.complete and record.error is None:
            node = self.node
            if node is not None and node.has_steps and self.shared.runner.has_after(node.config):
                flowed = tap.assembler.answer(whole=False)
        if flowed is not None or self.background:
            self.shared.record_later(self, record, recorder, flowed)
        else:
            recorder.record(record)

    def _publisher(self, key: str, entry: CachedAnswer) -> Callable[[], Awaitable[None]] | None:
        """What publishes a semantic request's entry once its answer is stored (None for other requests): with the
        lookup's vector, else after one embedding; when none can be made now (a busy pool), in the background."""
        if self._semantic is None:
            return None
        spart, prompt, vector = self._semantic
        semantic = self.shared.semantic
        cache = self.shared.cache

        async def publish() -> None:
            if not await semantic.publish(spart, key, prompt, vector, entry.expires_ms, tries=1):
                cache.background(lambda: semantic.publish(spart, key, prompt, None, entry.expires_ms, retrying=True))

        return publish

    async def settle(self, record: RequestRecord, recorder: Any, flowed: dict[str, Any] | None) -> None:
        """Run a flowed stream's output checks and wait for async items, then write the log line."""
        try:
            async with asyncio.timeout(LOG_WAIT_S):
                if flowed is not None:
                    assert self.node is not None and self.view is not None
                    phase = await self.shared.runner.after(self.node.config, self.view, GuardrailAnswer(json=flowed))
                    self._add(phase)
                if self.background:
                    done = await asyncio.gather(*(task for _, task in self.background), return_exceptions=True)
                    for (phase_name, _), result in zip(self.background, done):
                        if isinstance(result, HookResult):
                            self.async_results.append((phase_name, result))
                            if result.feedback is not None:
                                fb = result.feedback
                                self.feedback.append(FeedbackRecord(result.id, result.verdict, fb.value, fb.weight,
                                                                    fb.metadata))
        except TimeoutError:
            log.warning("request %s: guardrails still running after %.0f s; its log line goes without them",
                        self.ctx.trace_id, LOG_WAIT_S)
        except Exception:  # the log line is written whatever happened
            log.exception("guardrails after the answer failed")
        finally:
            recorder.record(record)

    def log_view(self) -> dict[str, Any] | None:
        """What the request log line carries: every hook result (async ones included) and the feedback."""
        if not (self.results.ran or self.async_results or self.feedback):
            return None
        before = list(self.results.before_request_hooks)
        after = list(self.results.after_request_hooks)
        for phase_name, result in self.async_results:
            (before if phase_name == "before" else after).append(result)
        return {"before_request_hooks": before, "after_request_hooks": after, "feedback": self.feedback}
