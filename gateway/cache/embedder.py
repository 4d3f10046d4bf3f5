"""Prompt embeddings off the event loop: the ``Embedder`` protocol and the local model behind a bounded thread pool.

``LocalEmbedder.embed(text)`` never runs the model on the event loop. Work goes to a small thread pool (onnxruntime
releases the GIL while it runs, so threads are enough; measured: the loop keeps serving while a worker embeds) with
a bounded queue: when ``threads + queue`` texts are already waiting or running, ``embed`` answers ``None`` at once
and the caller proceeds as a cache MISS. Every wait is bounded by ``timeout_s`` (default 1 s; also ``None`` when it
runs out). The model loads lazily, in the pool, on the first call (about 0.8 s); if that outlasts the timeout, that
call is a MISS and the load goes on for the next ones. A failed load is logged once and every later call answers
``None`` without trying again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from gateway.waiting import within

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("gateway.cache")


@runtime_checkable
class Embedder(Protocol):
    """What the semantic cache needs from an embedding source: unit vectors, or ``None`` to skip the lookup.

    ``model_id`` and ``dimensions`` name the vector space: entries embedded by one model are only ever compared
    with queries embedded by the same one (keep ``model_id`` in the cache partition).
    """

    model_id: str
    dimensions: int

    async def embed(self, text: str) -> np.ndarray | None:
        """The text's L2-normalised float32 vector, or ``None`` when it cannot be had in time (a MISS)."""
        ...

    async def close(self) -> None:
        """Release threads, sessions and models."""
        ...


class EmbedderStats(msgspec.Struct, gc=False):
    """Counters of one embedder (for metrics and tests)."""

    embedded: int = 0
    rejected: int = 0  # queue full: answered None at once
    timed_out: int = 0
    failed: int = 0
    loaded: bool = False
    load_failed: bool = False


class LocalEmbedder:
    """The packaged model (``MiniLmModel``) in a bounded worker pool; see the module docstring."""

    def __init__(
        self,
        *,
        threads: int = 1,
        queue: int = 16,
        timeout_s: float = 1.0,
        intra_op_threads: int = 1,
        model_factory: Callable[[], Any] | None = None,
    ) -> None:
        from gateway.cache.local_model import DIMENSIONS, MODEL_ID

        if threads < 1 or queue < 0 or timeout_s <= 0:
            raise ValueError("threads must be >= 1, queue >= 0 and timeout_s > 0")
        self.model_id: str = MODEL_ID
        self.dimensions: int = DIMENSIONS
        self.threads = threads
        self.capacity = threads + queue
        self.timeout_s = timeout_s
        self.stats = EmbedderStats()
        self._intra_op_threads = intra_op_threads
        self._factory = model_factory
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending = 0

    @property
    def pending(self) -> int:
        """Texts queued or being embedded now."""
        return self._pending

    async def embed(self, text: str) -> np.ndarray | None:
        if self.stats.load_failed or self._pending >= self.capacity:
            self.stats.rejected += 1
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="gateway-embed")
        self._pending += 1
        loop = asyncio.get_running_loop()
        try:
            future: Future = self._pool.submit(self._embed_in_worker, text)
        except RuntimeError:  # the pool is shut down
            self._pending -= 1
            return None
        future.add_done_callback(lambda _f: _call_soon(loop, self._finished))
        try:
            vector = await within(asyncio.wrap_future(future), self.timeout_s)
        except TimeoutError:
            self.stats.timed_out += 1
            return None
        except Exception:  # a failed embedding is a MISS, never an error for the request
            self.stats.failed += 1
            log.exception("embedding failed")
            return None
        if vector is not None:
            self.stats.embedded += 1
        return vector

    def _finished(self) -> None:
        self._pending -= 1

    def _embed_in_worker(self, text: str) -> np.ndarray | None:
        model = self._model or self._load()
        if model is None:
            return None
        return model.embed(text)

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None and not self.stats.load_failed:
                try:
                    self._model = self._factory() if self._factory else _load_packaged(self._intra_op_threads)
                    self.stats.loaded = True
                except Exception:  # a model that fails to load turns semantic lookups off, not the worker
                    self.stats.load_failed = True
                    log.exception("the local embedding model failed to load; semantic lookups are skipped")
            return self._model

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, lambda: pool.shutdown(cancel_futures=True))
        self._model = None


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:  # the loop has closed: nobody is counting any more
        pass


def _load_packaged(intra_op_threads: int) -> Any:
    from gateway.cache.local_model import MiniLmModel

    model = MiniLmModel(intra_op_threads=intra_op_threads)
    _return_freed_memory()
    return model


def _return_freed_memory() -> None:
    """Give the heap that building the session freed back to the system (glibc only; ~60 MB of RSS)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
