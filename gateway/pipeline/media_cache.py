"""The response cache on the images and audio routes: an answer kept as the bytes relayed, with its content type.

The lookup is chat's (``CacheStep``: ``max_age``, the workspace and namespace or metadata, the target, force
refresh, the ``x-gateway-cache-status`` values) over a key made of the body as sent upstream (its fields, after
param rewriting and redaction), whether the answer is streamed (an SSE answer is kept as SSE, so ``stream`` counts
here, unlike on chat) and, for a multipart upload, each file's part name, filename, content type, size and digest
(computed while the upload is spooled, ``media_form.py``). ``mode: semantic`` looks up the exact key only on these
routes (never ``SEMANTIC_HIT``): a near prompt must not speak other words or transcribe another file.

The answer (JSON with base64 images, text, SRT, audio bytes, an SSE stream) is collected as it is relayed and
stored once it ended well (not broken off, left by the client, nor an event stream whose last event is an error),
before its last byte leaves; one bigger than ``MAX_ENTRY_BYTES`` (the cache's bound
for every answer) is not collected further nor stored, and its request stays a ``MISS``. A hit answers the stored
bytes with the stored content type; an SSE answer goes out event by event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gateway.pipeline.media_form import MediaForm
from gateway.pipeline.outcome import JsonOutcome
from gateway.routing.plan import Node
from gateway.schema.config import Config

if TYPE_CHECKING:  # a type only: the cache loads when a request first needs it (with the steps)
    from gateway.pipeline.cache_step import CacheStep


class MediaAnswer(msgspec.Struct, array_like=True, gc=False):
    """What a cached media answer's entry body holds: the answer's content type and its bytes as relayed."""

    content_type: str
    body: bytes


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(MediaAnswer).decode


class CachedMedia:
    """A hit: the stored answer and who gave it."""

    __slots__ = ("answer", "provider", "model")

    def __init__(self, answer: MediaAnswer, provider: str, model: str | None) -> None:
        self.answer = answer
        self.provider = provider
        self.model = model


class AnswerCollector:
    """The relayed pieces of an answer to store, up to ``bound`` bytes (beyond: ``full``, nothing kept)."""

    __slots__ = ("pieces", "size", "full", "bound")

    def __init__(self, bound: int) -> None:
        self.pieces: list[bytes] = []
        self.size = 0
        self.full = False
        self.bound = bound

    def feed(self, piece: bytes) -> None:
        if self.full:
            return
        self.size += len(piece)
        if self.size > self.bound:
            self.full = True
            self.pieces.clear()
            return
        self.pieces.append(piece)


def tree_caches(node: Node) -> bool:
    """Whether any node of a routing tree caches answers (only then are a request's uploaded files hashed)."""
    if node.config.cache is not None:
        return True
    return any(tree_caches(child) for child in node.children)


def cache_doc(doc: dict[str, Any], streamed: bool, form: MediaForm | None) -> dict[str, Any] | None:
    """What the key covers of one attempt's request (None: its files were not hashed, so nothing is cached)."""
    files = None
    if form is not None:
        files = form.identity()
        if files is None:
            return None
    return {"body": doc, "streamed": streamed, "files": files}


class MediaCache:
    """One media request's use of the cache, through its steps' ``CacheStep`` (whose ``hit`` makes the log line
    say that no tokens were spent)."""

    __slots__ = ("step", "bound")

    def __init__(self, step: CacheStep) -> None:
        from gateway.cache.answers import MAX_ENTRY_BYTES  # loaded by then: the step's module imports it

        step.stream = False  # a stored media answer is answered as stored (SSE included), never rebuilt
        self.step = step
        self.bound = MAX_ENTRY_BYTES

    async def lookup(self, node: Node, doc: dict[str, Any], streamed: bool, form: MediaForm | None
                     ) -> CachedMedia | None:
        """A new attempt at ``node``: the cached answer of ``doc`` (None on a miss); sets the cache status."""
        step = self.step
        step.begin(node)
        step.record.cache_status = "DISABLED"
        config: Config = node.config
        if config.cache is None:
            return None
        key_doc = cache_doc(doc, streamed, form)
        if key_doc is None:
            return None
        found = await step.lookup(config, config.cache, key_doc)
        if not isinstance(found, JsonOutcome):
            return None
        try:
            answer = _decode(found.body)
        except msgspec.DecodeError:  # not a media entry: answered by the upstream and stored anew
            step.hit = False
            step.record.cache_status = "MISS"
            return None
        return CachedMedia(answer, found.provider, found.model)

    def collector(self) -> AnswerCollector | None:
        """Where the relayed answer is collected, when it is to be stored."""
        return AnswerCollector(self.bound) if self.step.stores else None

    async def store(self, collected: AnswerCollector, content_type: str, provider: str, model: str | None) -> None:
        """Store a complete answer (not one that outgrew the bound, nor an event stream that ended with an error)."""
        if collected.full:
            return
        answer = b"".join(collected.pieces)
        if content_type.startswith("text/event-stream") and ended_with_error(answer):
            return
        body = _encode(MediaAnswer(content_type, answer))
        if len(body) <= self.bound:
            await self.step.store(body, provider, model)


def ended_with_error(stream: bytes) -> bool:
    """Whether an SSE answer's last event is an error (``event: error``, a ``"type": "error"`` or an ``error``
    object)."""
    last = stream.rstrip().rpartition(b"\n\n")[2].strip()
    if last.startswith(b"event: error"):
        return True
    data = last.partition(b"data:")[2].strip()
    if len(data) > 65536:  # an error event is small (a final event with an image is not read)
        return False
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return isinstance(doc, dict) and (doc.get("type") == "error" or doc.get("error") is not None)


def sse_events(body: bytes) -> list[bytes]:
    """A stored SSE answer cut after each event's blank line (the pieces a replay sends)."""
    events = []
    start = 0
    while True:
        end = body.find(b"\n\n", start)
        if end < 0:
            break
        events.append(body[start:end + 2])
        start = end + 2
    if start < len(body):
        events.append(body[start:])
    return events
