"""The response-cache step of one request: the exact key and the semantic lookup before an attempt, and the answer
stored (and a semantic request's entry published) before the last byte of the response leaves.

A JSON answer is served as it was stored; a stream is replayed as SSE (``gateway.cache.stream``) when its stored
answer can be. ``x-gateway-cache-force-refresh: true`` skips the lookup and stores the new answer.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol

import msgspec

from gateway.cache.answers import CachedAnswer, ResponseCache, max_age_s
from gateway.cache.keys import partition, simple_key
from gateway.cache.prompt import SemanticPrompt
from gateway.cache.semantic import SemanticCache, semantic_partition, semantic_prompt
from gateway.cache.stream import replay, replayable
from gateway.http.context import RequestContext
from gateway.observability.record import RequestRecord
from gateway.pipeline.outcome import JsonOutcome, StreamOutcome
from gateway.pipeline.stream_steps import replayed
from gateway.providers.base import CHAT, COMPLETIONS
from gateway.routing.plan import Node
from gateway.schema.config import CacheConfig, Config


class CacheParts(Protocol):
    """What a cache step uses of the worker's steps (``gateway.pipeline.steps.PipelineSteps``)."""

    cache: ResponseCache

    @property
    def semantic(self) -> SemanticCache: ...

_decode = msgspec.json.decode
_STREAMED = frozenset({CHAT, COMPLETIONS})


def include_usage(request: Any) -> bool:
    """Whether the client asked for a stream's usage chunk (``stream_options.include_usage``)."""
    options = getattr(request, "stream_options", None)
    return bool(options is not None and options.include_usage)


class CacheStep:
    """One request's cache state: the key of the attempt's target, how old an answer it takes, whether it hit, and
    a semantic request's (partition, prompt, vector) to publish with its answer."""

    __slots__ = ("shared", "ctx", "endpoint", "request", "stream", "record", "key", "max_age", "hit", "answer_doc",
                 "semantic")

    def __init__(self, shared: CacheParts, ctx: RequestContext, endpoint: str, request: Any, stream: bool,
                 record: RequestRecord) -> None:
        self.shared = shared
        self.ctx = ctx
        self.endpoint = endpoint
        self.request = request
        self.stream = stream
        self.record = record
        self.key: str | None = None
        self.max_age = 0
        self.hit = False
        #: the decoded stored answer of a replayed stream (what output checks read)
        self.answer_doc: Any = None
        #: (partition, prompt, vector or None) of a semantic request, to publish its entry with the answer
        self.semantic: tuple[bytes, SemanticPrompt, Any] | None = None

    def begin(self, node: Node) -> None:
        """A new attempt: nothing looked up yet."""
        self.key = None
        self.semantic = None
        self.hit = False

    async def lookup(self, config: Config, cache: CacheConfig, doc: dict) -> JsonOutcome | StreamOutcome | None:
        """The cached outcome for ``doc`` sent to the target ``config`` (None on a miss); sets the cache status."""
        ctx = self.ctx
        self.max_age = max_age_s(cache.max_age)
        if not self.max_age:  # no answer is young enough to serve, and none is stored
            self.record.cache_status = "REFRESH" if ctx.cache_force_refresh else "MISS"
            return None
        part = partition(ctx.workspace or "default", ctx.cache_namespace, ctx.metadata)
        self.key = simple_key(part, config, self.endpoint, doc)
        semantic = cache.mode == "semantic"
        if ctx.cache_force_refresh:
            self.record.cache_status = "REFRESH"
            if semantic:
                self._semantic_step(part, config, doc)
            return None
        self.record.cache_status = "MISS"
        found = await self.shared.cache.get(self.key, self.max_age)
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
            self.semantic = (spart, prompt, None)
        return prompt

    async def _semantic_lookup(self, part: bytes, config: Config, doc: dict) -> CachedAnswer | None:
        prompt = self._semantic_step(part, config, doc)
        if prompt is None:
            return None
        assert self.semantic is not None
        spart = self.semantic[0]
        cache = self.shared.semantic
        read = cache.read_soon()  # the entries stored since the last read, read while the prompt is embedded
        vector = await cache.embed(prompt.text)
        if vector is None:
            return None
        self.semantic = (spart, prompt, vector)
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
        events = replay(answer, self.endpoint, include_usage(self.request))
        return replayed(events, found.provider, found.model)

    def _hit(self, status: str) -> None:
        self.hit = True
        self.record.cache_status = status

    @property
    def stores(self) -> bool:
        """Whether this attempt's answer is to be stored (a key was made and the answer is not the cached one)."""
        return self.key is not None and not self.hit

    async def store(self, body: bytes, provider: str, model: str | None) -> None:
        """Store the answer under the request's key and publish a semantic request's entry; returns once both are
        in the store (a client that leaves meanwhile does not cut them)."""
        key = self.key
        assert key is not None
        entry = self.shared.cache.entry(body, provider, model, self.max_age)
        await self.shared.cache.put_now(key, entry, self._publisher(key, entry))

    def _publisher(self, key: str, entry: CachedAnswer) -> Callable[[], Awaitable[None]] | None:
        """What publishes a semantic request's entry once its answer is stored (None for other requests): with the
        lookup's vector, else after one embedding; when none can be made now (a busy pool), in the background."""
        if self.semantic is None:
            return None
        spart, prompt, vector = self.semantic
        semantic = self.shared.semantic
        cache = self.shared.cache

        async def publish() -> None:
            if not await semantic.publish(spart, key, prompt, vector, entry.expires_ms, tries=1):
                cache.background(lambda: semantic.publish(spart, key, prompt, None, entry.expires_ms, retrying=True))

        return publish

    def log_view(self) -> dict[str, Any] | None:
        return None  # the cache status is a field of the record itself
