"""The semantic step of ``cache.mode: semantic``: after an exact miss, a prompt is embedded and compared with the
entries of its partition; entries live in the state store and every worker's index follows them.

Partition: everything of a request that is not the embedded text must match exactly: the exact key's partition
(workspace, namespace or metadata), the target, the endpoint, every body field but ``messages`` / ``prompt``, the
conversation's context digest (``prompt.py``: earlier turns, the rest of a long message, non-text parts) and the
embedding model. Only chat and completions requests with a user's text (see ``prompt.py``) have a semantic step.

A hit is the partition's best entry at or above ``GATEWAY_SEMANTIC_CACHE_THRESHOLD`` (cosine) whose prompt has
the same literals (``literals.py``: numbers and quoted strings), and whose answer is still in the cache space. Its
answer is the one stored under that entry's exact key.

Entries: when a semantic request's answer is stored (before the last byte of its response leaves), its entry
(partition, exact key, model, int8 vector and scale, literals, expiry) is appended to the store's ``semantic`` log
(the newest GATEWAY_SEMANTIC_CACHE_MAX_ENTRIES kept), and the answer is stored under the exact key as a simple
entry. Each worker starts following the log at its first embedding: it reads what the log holds, then polls it
every ``POLL_S`` (0.25 s). A lookup also reads the log's new entries itself (``read_soon``, started while its
prompt is embedded, and awaited for at most ``SYNC_WAIT_S`` before the search), so a client finds the answer
it was just given on any worker or instance. Reads never overlap: callers that come while one runs share the
next. Expired entries are purged from the index every ``PURGE_S``. A store that cannot be read leaves the index
as it is (lookups go on; new entries arrive when it answers again). Index updates run on the event loop in
batches of ``BATCH`` that yield between them, so a worker catching up with a long log keeps serving.

Embedding (the local model or a provider, see ``provider_embedder.py``) never runs on the event loop and is
bounded: a full pool or a slow embedding is a MISS.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any, Callable

import msgspec

from gateway.background import BackgroundTask
from gateway.cache.keys import KEY_VERSION, answer_fields, target_identity
from gateway.cache.numeric import numpy
from gateway.cache.prompt import SemanticPrompt, chat_prompt, completion_prompt
from gateway.cache.similarity_in_use import quantise
from gateway.providers.base import CHAT, COMPLETIONS
from gateway.schema.config import Config
from gateway.state.base import StateStore, StateStoreError

log = logging.getLogger("gateway.cache")

LOG_NAME = "semantic"
POLL_S = 0.25
PURGE_S = 10.0
READ_LIMIT = 1000
BATCH = 200
PUBLISH_TRIES = 4
PUBLISH_RETRY_S = 0.5
#: the longest a lookup waits for the read of the log's new entries
SYNC_WAIT_S = 0.5

_encode_sorted = msgspec.json.Encoder(order="sorted").encode


class SemanticEntry(msgspec.Struct, array_like=True, gc=False):
    """One entry of the semantic log."""

    partition: bytes
    key: str
    model: str
    codes: bytes
    scale: float
    literals: list[str]
    expires_ms: int


_encode_entry = msgspec.msgpack.Encoder().encode
_decode_entry = msgspec.msgpack.Decoder(SemanticEntry).decode


def semantic_prompt(endpoint: str, body: dict[str, Any]) -> SemanticPrompt | None:
    """What of a chat or completions body is embedded (None: no semantic step for this request)."""
    if endpoint == CHAT:
        messages = body.get("messages")
        return chat_prompt(messages) if isinstance(messages, list) else None
    if endpoint == COMPLETIONS:
        return completion_prompt(body.get("prompt"))
    return None


def semantic_partition(part: bytes, config: Config, endpoint: str, body: dict[str, Any], prompt: SemanticPrompt,
                       model_id: str) -> bytes:
    """The digest of everything that must match exactly for two prompts to share an answer."""
    rest = answer_fields(body)
    rest.pop("messages" if endpoint == CHAT else "prompt", None)
    digest = hashlib.blake2b(part, digest_size=20)
    digest.update(b"\x00")
    digest.update(_encode_sorted([KEY_VERSION, model_id, target_identity(config), endpoint, rest]))
    digest.update(prompt.context)
    return digest.digest()


class SemanticCache:
    """One worker's semantic step: its embedder, its index of the store's entries, and publishing new ones."""

    def __init__(self, store: StateStore, embedder: Any, threshold: float, max_entries: int,
                 clock: Callable[[], float]) -> None:
        self.store = store
        self.embedder = embedder
        self.threshold = threshold
        self.max_entries = max_entries
        self.clock = clock
        self.seq = 0
        self._index: Any = None
        self._literals: dict[str, tuple[str, ...]] = {}
        #: follows the log from this worker's first embedding until close
        self._follower = BackgroundTask("gateway-semantic-index")
        self._reading = asyncio.Lock()
        #: the read that has not started yet (every caller until it starts shares it), and every read task
        self._next_read: asyncio.Task[None] | None = None
        self._reads: set[asyncio.Task[None]] = set()

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    def __len__(self) -> int:
        return len(self._literals)

    # --- lookups ------------------------------------------------------------------------------------------------

    async def embed(self, text: str) -> Any:
        """The prompt's unit vector, or None (no time or room to embed it now). The first vector starts following
        the log: numpy is then imported (the embedding thread imports it first; two threads importing it for the
        first time at once can deadlock, so the event loop never races the model's load)."""
        vector = await self.embedder.embed(text)
        if vector is not None and not self._follower.running:
            self._follower.start(self._follow)
        return vector

    def search(self, partition: bytes, vector: Any, literals: tuple[str, ...]) -> str | None:
        """The exact key of the best entry at or above the threshold, when its literals are the prompt's."""
        index = self._index
        if index is None or getattr(vector, "shape", (0,))[0] != index.dim:
            return None
        found = index.search(partition, vector, self.threshold, self.clock())
        if found is None:
            return None
        key = found[0]
        return key if self._literals.get(key) == literals else None

    # --- publishing ---------------------------------------------------------------------------------------------

    async def publish(self, partition: bytes, key: str, prompt: SemanticPrompt, vector: Any, expires_ms: int,
                      tries: int = PUBLISH_TRIES, retrying: bool = False) -> bool:
        """Append the entry of an answer just stored under ``key``, embedding the prompt first when the lookup could
        not (a busy pool or a model still loading gets ``tries`` tries, ``PUBLISH_RETRY_S`` apart, the first one
        too when ``retrying``). False when no vector could be made (nothing appended); a store that fails the
        append drops the entry."""
        for attempt in range(tries):
            if vector is not None:
                break
            if attempt or retrying:
                await asyncio.sleep(PUBLISH_RETRY_S)
            vector = await self.embed(prompt.text)
        if vector is None:
            return False
        codes, scale = quantise(numpy().asarray(vector, dtype="float32"))
        entry = SemanticEntry(partition, key, self.model_id, codes.tobytes(), float(scale), list(prompt.literals),
                              expires_ms)
        try:
            await self.store.log_append(LOG_NAME, _encode_entry(entry), self.max_entries)
        except StateStoreError:
            pass
        return True

    # --- following the store ------------------------------------------------------------------------------------

    def read_soon(self) -> asyncio.Task[None] | None:
        """A read of the log's new entries into the index that starts now, or as soon as the running one has ended
        (so it sees every entry stored before this call); None until this worker follows the log."""
        if not self._follower.running:
            return None
        task = self._next_read
        if task is None:
            task = self._next_read = asyncio.get_running_loop().create_task(self._read())
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)
        return task

    async def synced(self, read: asyncio.Task[None] | None) -> None:
        """Wait (at most ``SYNC_WAIT_S``, never cancelling it) for ``read``, a ``read_soon()`` task (None: one
        started now): the index then holds every entry stored before that read was asked for."""
        task = read if read is not None else self.read_soon()
        if task is not None and not task.done():
            await asyncio.wait((task,), timeout=SYNC_WAIT_S)

    async def _read(self) -> None:
        async with self._reading:
            self._next_read = None  # from now on a caller needs the read after this one
            try:
                while await self.catch_up() >= READ_LIMIT:
                    pass
            except asyncio.CancelledError:
                raise
            except Exception:  # the follower must outlive one bad read
                log.exception("semantic cache: reading new entries failed")

    async def _follow(self) -> None:
        loop = asyncio.get_running_loop()
        next_purge = loop.time() + PURGE_S
        while True:
            read = self.read_soon()
            if read is not None:
                await asyncio.wait((read,))  # a cancelled follower leaves a read others may share
            if loop.time() >= next_purge:
                self.purge()
                next_purge = loop.time() + PURGE_S
            await asyncio.sleep(POLL_S)

    async def catch_up(self) -> int:
        """Read the entries stored since the last read into the index; how many were read."""
        try:
            items = await self.store.log_read(LOG_NAME, self.seq, READ_LIMIT)
        except StateStoreError:
            return 0
        for n, (seq, raw) in enumerate(items):
            self.seq = seq
            self._add(raw)
            if n % BATCH == BATCH - 1:
                await asyncio.sleep(0)
        return len(items)

    def _add(self, raw: bytes) -> None:
        try:
            entry = _decode_entry(raw)
        except msgspec.DecodeError:
            return
        if entry.model != self.model_id or entry.expires_ms <= self.clock() * 1000:
            return
        np = numpy()
        vector = np.frombuffer(entry.codes, dtype=np.int8).astype(np.float32) * entry.scale
        index = self._index
        if index is None:
            from gateway.cache.index import PartitionedIndex

            index = self._index = PartitionedIndex(int(vector.size))
        if vector.size != index.dim or entry.scale <= 0:
            return
        index.add(entry.partition, entry.key, vector, entry.expires_ms / 1000)
        self._literals.pop(entry.key, None)  # a key stored again counts as the newest
        self._literals[entry.key] = tuple(entry.literals)
        if len(self._literals) > self.max_entries:
            oldest = next(iter(self._literals))
            index.remove(oldest)
            del self._literals[oldest]

    def purge(self) -> None:
        """Drop expired entries from the index."""
        index = self._index
        if index is None or not index.purge(self.clock()):
            return
        self._literals = {k: v for k, v in self._literals.items() if k in index}

    async def close(self) -> None:
        await self._follower.close()
        for task in list(self._reads):
            task.cancel()
        if self._reads:
            await asyncio.wait(set(self._reads))
        self._next_read = None
        await self.embedder.close()
