"""Cached answers in the state store's cache space, shared by every worker and instance using the store.

An entry is the unified JSON answer (for a streamed request: the answer assembled from its chunks, see
``stream.py``), the provider and model that gave it, when it was stored and its expiry, encoded with MessagePack.
``max_age`` is the config's ``cache.max_age`` in seconds: ``DEFAULT_MAX_AGE_S`` when unset, at most
``MAX_MAX_AGE_S`` (larger values are capped). It bounds both sides: a writer's gives its entries their lifetime,
and a reader is never served an entry older than its own (whoever stored it, for however long). ``0`` serves
nothing and stores nothing. The expiry is kept in the entry as well as given to the store as its TTL, so an
entry is never served past it whatever the backend's own clock does (and tests can move an injected clock).

Reads and writes are bounded by the store's timeout; a store that cannot answer is a MISS, and a failed write is
dropped (counted by the store as an error). An answer is written before the last byte of its response leaves
(``put_now``), so the next request of the same client finds it on any worker or instance; the write runs as a
task of its own (a client that leaves meanwhile does not cut it), at most ``WRITES_MAX`` at once per worker (more
are dropped); answers over ``MAX_ENTRY_BYTES`` are not stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

import msgspec

from gateway.state.base import StateStore, StateStoreError
from gateway.task_set import BoundedTasks

log = logging.getLogger("gateway.cache")

DEFAULT_MAX_AGE_S = 7 * 24 * 3600
MAX_MAX_AGE_S = 30 * 24 * 3600
MAX_ENTRY_BYTES = 4 * 1024 * 1024
WRITES_MAX = 256


class CachedAnswer(msgspec.Struct, array_like=True, gc=False):
    """One cached answer: the unified JSON ``body``, who answered, and when the entry stops being served."""

    body: bytes
    provider: str
    model: str | None
    stored_ms: int
    expires_ms: int


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(CachedAnswer).decode


def max_age_s(configured: int | None) -> int:
    """The lifetime of new entries in seconds for a config's ``cache.max_age`` (see the module docstring)."""
    if configured is None:
        return DEFAULT_MAX_AGE_S
    return max(0, min(configured, MAX_MAX_AGE_S))


class ResponseCache:
    """Reads and writes cached answers through the state store (one per worker)."""

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._writes: BoundedTasks[None] = BoundedTasks(WRITES_MAX)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def get(self, key: str, max_age: int) -> CachedAnswer | None:
        """The live entry under ``key`` stored less than ``max_age`` seconds ago (the reader's ``max_age_s``), else
        None (missing, expired, older, unreadable, or the store did not answer)."""
        try:
            raw = await self.store.cache_get(key)
        except StateStoreError:
            return None
        if raw is None:
            return None
        try:
            answer = _decode(raw)
        except msgspec.DecodeError:
            return None
        now = self.now_ms()
        return answer if answer.expires_ms > now and now - answer.stored_ms < max_age * 1000 else None

    def entry(self, body: bytes, provider: str, model: str | None, max_age: int) -> CachedAnswer:
        now = self.now_ms()
        return CachedAnswer(body, provider, model, now, now + max_age * 1000)

    async def put(self, key: str, answer: CachedAnswer) -> bool:
        """Store ``answer`` under ``key`` now; False when it is not stored (too large, expired, store failure)."""
        ttl_ms = answer.expires_ms - self.now_ms()
        if ttl_ms <= 0 or len(answer.body) > MAX_ENTRY_BYTES:
            return False
        try:
            await self.store.cache_set(key, _encode(answer), ttl_ms)
        except StateStoreError:
            return False
        return True

    async def put_now(self, key: str, answer: CachedAnswer,
                      then: Callable[[], Awaitable[None]] | None = None) -> None:
        """Store ``answer``, then run ``then()`` when it was stored, and return when both are done. They run as a
        task of their own, which a cancelled caller does not cancel (dropped when ``WRITES_MAX`` writes are already
        running)."""
        task = self.put_later(key, answer, then)
        if task is not None:
            await asyncio.shield(task)

    def put_later(self, key: str, answer: CachedAnswer,
                  then: Callable[[], Awaitable[None]] | None = None) -> asyncio.Task[None] | None:
        """Store ``answer`` in the background, then run ``then()`` when it was stored; the task (None: dropped)."""
        return self.background(lambda: self._put_then(key, answer, then))

    def background(self, work: Callable[[], Awaitable[object]]) -> asyncio.Task[None] | None:
        """Run ``work()`` as a task of its own (a cache write nobody waits for, or that must outlive a cancelled
        caller); dropped (None) when ``WRITES_MAX`` writes are already running. A failure is logged."""
        task = self._writes.spawn(lambda: self._quietly(work))
        if task is None:
            log.warning("cache write dropped: %d writes already running", len(self._writes))
        return task

    async def _put_then(self, key: str, answer: CachedAnswer, then: Callable[[], Awaitable[None]] | None) -> None:
        if await self.put(key, answer) and then is not None:
            await then()

    @staticmethod
    async def _quietly(work: Callable[[], Awaitable[object]]) -> None:
        try:
            await work()
        except Exception:  # nobody awaits this task
            log.exception("cache write failed")

    async def drain(self, timeout_s: float = 5.0) -> None:
        """Wait (bounded) for background writes to finish (at shutdown, and in tests)."""
        await self._writes.wait(timeout_s)
