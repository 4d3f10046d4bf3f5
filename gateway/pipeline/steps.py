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
from typing import TYPE_CHECKING, Any, Callable, Protocol

import msgspec

from gateway.cache.answers import ResponseCache
from gateway.cache.semantic import SemanticCache
from gateway.cache.stream import StreamAssembler, replay
from gateway.controlplane.secrets import SecretBox
from gateway.guardrails import (
    GuardrailAnswer,
    GuardrailRunner,
    attach_hook_results,
)
from gateway.guardrails.saved_cache import SavedGuardrailCache, guardrail_repository
from gateway.http.context import RequestContext
from gateway.observability.record import RequestRecord
from gateway.pipeline.cache_step import CacheStep, include_usage
from gateway.pipeline.guardrail_step import GuardrailStep
from gateway.pipeline.outcome import JsonOutcome, StreamOutcome
from gateway.pipeline.stream_steps import AnswerTap, first_with, read_whole, replayed, with_usage
from gateway.routing.plan import Node
from gateway.task_set import BoundedTasks

if TYPE_CHECKING:
    from gateway.settings import Settings
    from gateway.state.base import StateStore
    from gateway.upstream.client import UpstreamClient

log = logging.getLogger("gateway.guardrails")

_decode = msgspec.json.decode
_encode = msgspec.json.encode

#: the longest a request's log line waits for its async items and a flowed stream's output checks
LOG_WAIT_S = 65.0
#: request log lines waiting at once per worker; beyond it a line is written without waiting
DEFERRED_MAX = 1024
HELD_HEADER = (b"x-gateway-stream-held", b"true")


class PipelineSteps:
    """Per worker: the response cache, the guardrail runner and the saved-guardrail cache (``Runtime.steps`` makes
    it when a request or route first needs it, with the few worker objects it uses)."""

    def __init__(self, settings: Settings, store: StateStore, client: UpstreamClient,
                 subscribe: Callable[[Callable[[], None]], None], box: Callable[[], SecretBox],
                 make_embedder: Callable[[], Any] | None = None, clock: Callable[[], float] = time.time) -> None:
        """``subscribe`` registers a callback for record changes (the saved guardrails are reloaded); ``box`` opens
        the saved guardrails' sealed credentials; ``make_embedder`` makes the semantic cache's embedder over providers
        (None: the local model)."""
        self.settings = settings
        self.store = store
        self.clock = clock
        self.cache = ResponseCache(store, clock)
        self.saved = SavedGuardrailCache(guardrail_repository(store), box)
        subscribe(self.saved.invalidate)
        self.runner = GuardrailRunner(settings, client, resolve_saved=self.saved.resolve)
        self._deferred: BoundedTasks[None] = BoundedTasks(DEFERRED_MAX)
        self._semantic: SemanticCache | None = None
        self._make_embedder = make_embedder

    @property
    def semantic(self) -> SemanticCache:
        """The semantic step, made on first use (the embedder loads its model at its first embedding)."""
        if self._semantic is None:
            settings = self.settings
            if self._make_embedder is not None:
                embedder: Any = self._make_embedder()
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
        if self._deferred.spawn(lambda: steps.settle(record, recorder, flowed)) is None:
            log.warning("request log line written without waiting for its guardrails: %d already waiting",
                        len(self._deferred))
            recorder.record(record)

    async def close(self) -> None:
        """Stop async items (their requests' log lines are then written), then let cache writes finish."""
        await self.runner.close()
        await self._deferred.wait(5.0)
        await self.cache.drain()
        if self._semantic is not None:
            await self._semantic.close()


class Step(Protocol):
    """What every step of a request answers to, whatever it does around an attempt (``CacheStep``,
    ``GuardrailStep``): it is told of each attempt's node, and says what the request's log line carries of it."""

    def begin(self, node: Node) -> None:
        """A new attempt at ``node``: forget the last attempt's target-bound state."""

    def log_view(self) -> dict[str, Any] | None:
        """What the request's log line carries of this step (None: nothing)."""


class RequestSteps:
    """One request's steps (made only when its routing tree has a cache or guardrails): the guardrail step's input
    checks, then the cache step's lookup, before each attempt; on the answer the output checks, the answer stored,
    the status and ``hook_results``; a stream held whole when an output item may deny or redact it."""

    __slots__ = ("shared", "endpoint", "request", "record", "node", "guard", "cache", "steps", "tap", "held")

    def __init__(self, shared: PipelineSteps, ctx: RequestContext, endpoint: str, request: Any, stream: bool,
                 record: RequestRecord) -> None:
        self.shared = shared
        self.endpoint = endpoint
        self.request = request
        self.record = record
        self.node: Node | None = None
        self.guard = GuardrailStep(shared.runner, ctx, endpoint, stream)
        self.cache = CacheStep(shared, ctx, endpoint, request, stream, record)
        #: in the order they act before an attempt
        self.steps: tuple[Step, ...] = (self.guard, self.cache)
        self.tap: AnswerTap | None = None
        self.held = False

    # --- before the upstream call -------------------------------------------------------------------------------

    async def before_attempt(self, node: Node, body: bytes, decoded: Callable[[], dict] | None
                             ) -> tuple[bytes | None, JsonOutcome | StreamOutcome | None]:
        """Input checks, then the cache lookup, for one attempt at ``node``. Returns a replacement body (when a
        check redacted it) and the cached outcome on a hit; raises the 446 of a deny."""
        self.node = node
        for step in self.steps:
            step.begin(node)
        self.record.cache_status = "DISABLED"
        if not node.has_steps:
            return None, None
        doc = decoded() if decoded is not None else _decode(body)
        new_body = None
        redacted = await self.guard.before(node, doc)
        if redacted is not None:
            doc = redacted
            new_body = _encode(doc)
        config = node.config
        if config.cache is not None:
            return new_body, await self.cache.lookup(config, config.cache, doc)
        return new_body, None

    # --- on the answer ------------------------------------------------------------------------------------------

    async def answered(self, outcome: JsonOutcome | StreamOutcome) -> JsonOutcome | StreamOutcome:
        """Output checks on the answer (446 on a deny), its status and ``hook_results``; a stream that an output
        item may deny or redact is read whole first."""
        guard = self.guard
        after = guard.has_after(self.node)
        if isinstance(outcome, JsonOutcome):
            return await self._answered_json(outcome, after)
        if self.cache.hit:
            return await self._answered_replay(outcome, after)
        try:
            hold = after and await guard.may_change()
        except BaseException:
            outcome.response.close()
            raise
        if hold:
            return await self._hold(outcome)
        results = guard.results
        if results.ran:
            outcome.first = first_with(outcome.first, results)
            outcome.status = results.status
        if self.cache.key is not None or after:
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
            phase = await self.guard.after(GuardrailAnswer(json=_decode(body)))
            if phase.body is not None:
                outcome.body = _encode(phase.body)
        if self.cache.stores and outcome.status < 400:
            await self.cache.store(body, outcome.provider, outcome.model)
        results = self.guard.results
        if results.ran:
            outcome.body = attach_hook_results(outcome.body, results)
            outcome.status = results.status
        return outcome

    async def _answered_replay(self, outcome: StreamOutcome, after: bool) -> StreamOutcome:
        if after:
            phase = await self.guard.after(GuardrailAnswer(json=self.cache.answer_doc))
            if phase.body is not None:
                outcome.first = replay(phase.body, self.endpoint, include_usage(self.request))
        results = self.guard.results
        if results.ran:
            outcome.first = first_with(outcome.first, results)
            outcome.status = results.status
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
        phase = await self.guard.after(GuardrailAnswer(json=doc))
        if phase.body is not None:
            events = replay(phase.body, self.endpoint, include_usage(self.request))
        whole = with_usage(assembler.answer(), transformer.usage)
        results = self.guard.results
        if self.cache.stores and whole is not None and results.status < 400:
            await self.cache.store(_encode(whole), outcome.provider, outcome.model)
        if results.ran:
            events = first_with(events, results)
        return replayed(events, outcome.provider, outcome.model, transformer.usage, results.status)

    def response_headers(self) -> list[tuple[bytes, bytes]]:
        return [HELD_HEADER] if self.held else []

    async def stream_ended(self, record: RequestRecord) -> None:
        """A relayed stream ended well: store its answer (called before its final ``[DONE]`` is sent)."""
        tap = self.tap
        if tap is None or not tap.complete or not self.cache.stores or record.status >= 400:
            return
        whole = with_usage(tap.assembler.answer(), tap.usage)
        if whole is not None:
            await self.cache.store(_encode(whole), record.provider or "", record.model)

    # --- after the answer has gone --------------------------------------------------------------------------------

    def finish(self, record: RequestRecord, recorder: Any) -> None:
        """Start a flowed stream's output checks, and write the log line (now, or once the async items are
        done)."""
        if self.cache.hit:  # a cached answer spent no tokens
            record.usage = None
            record.usage_source = "none"
            record.answer = None
            record.relayed_head = None
            record.relayed_rest_bytes = record.relayed_rest_events = 0
        flowed: dict[str, Any] | None = None
        tap = self.tap
        if tap is not None and tap.complete and record.error is None and self.guard.has_after(self.node):
            flowed = tap.assembler.answer(whole=False)
        if flowed is not None or self.guard.background:
            self.shared.record_later(self, record, recorder, flowed)
        else:
            recorder.record(record)

    async def settle(self, record: RequestRecord, recorder: Any, flowed: dict[str, Any] | None) -> None:
        """Run a flowed stream's output checks and wait for async items, then write the log line."""
        try:
            async with asyncio.timeout(LOG_WAIT_S):
                await self.guard.settle(flowed)
        except TimeoutError:
            log.warning("request %s: guardrails still running after %.0f s; its log line goes without them",
                        self.guard.ctx.trace_id, LOG_WAIT_S)
        except Exception:  # the log line is written whatever happened
            log.exception("guardrails after the answer failed")
        finally:
            recorder.record(record)

    def log_view(self) -> dict[str, Any] | None:
        """What the request log line carries: every hook result (async ones included) and the feedback."""
        return self.guard.log_view()
