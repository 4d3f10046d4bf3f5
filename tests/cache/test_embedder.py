"""LocalEmbedder: embeddings off the event loop, in a bounded pool that answers None rather than wait."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import numpy as np
import pytest

from gateway.cache.embedder import Embedder, LocalEmbedder


class FakeModel:
    """Records the thread each call runs on; waits on ``gate`` when given."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.threads: list[int] = []

    def embed(self, text: str) -> np.ndarray:
        self.threads.append(threading.get_ident())
        if self.gate is not None:
            self.gate.wait(5)
        vector = np.zeros(384, dtype=np.float32)
        vector[len(text) % 384] = 1.0
        return vector


async def test_embedding_runs_in_a_worker_thread_not_the_loop() -> None:
    model = FakeModel()
    embedder = LocalEmbedder(model_factory=lambda: model)
    try:
        vector = await embedder.embed("hello")
        assert vector is not None and vector[5] == 1.0
        assert model.threads and threading.get_ident() not in model.threads
        assert isinstance(embedder, Embedder)
        assert embedder.stats.embedded == 1
    finally:
        await embedder.close()


async def test_the_model_loads_on_the_first_call_only() -> None:
    loads = []
    embedder = LocalEmbedder(model_factory=lambda: loads.append(1) or FakeModel())
    try:
        assert loads == [] and not embedder.stats.loaded
        await asyncio.gather(*(embedder.embed(f"t{i}") for i in range(5)))
        assert loads == [1] and embedder.stats.loaded
    finally:
        await embedder.close()


@pytest.mark.serial  # a time bound that a busy machine could break
async def test_a_full_queue_answers_none_at_once() -> None:
    gate = threading.Event()
    embedder = LocalEmbedder(threads=1, queue=2, model_factory=lambda: FakeModel(gate))
    try:
        waiting = [asyncio.ensure_future(embedder.embed(f"text {i}")) for i in range(3)]
        await asyncio.sleep(0.05)
        assert embedder.pending == 3
        started = time.perf_counter()
        assert await embedder.embed("one too many") is None
        assert time.perf_counter() - started < 0.5
        assert embedder.stats.rejected == 1
        gate.set()
        results = await asyncio.gather(*waiting)
        assert all(r is not None for r in results)
        await asyncio.sleep(0.01)
        assert embedder.pending == 0
        assert await embedder.embed("room again") is not None
    finally:
        gate.set()
        await embedder.close()


async def test_a_slow_embedding_is_given_up_after_the_timeout() -> None:
    gate = threading.Event()
    embedder = LocalEmbedder(timeout_s=0.1, model_factory=lambda: FakeModel(gate))
    try:
        assert await embedder.embed("slow") is None
        assert embedder.stats.timed_out == 1
    finally:
        gate.set()
        await embedder.close()


async def test_a_model_that_fails_to_load_makes_every_lookup_a_miss(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def broken() -> FakeModel:
        calls.append(1)
        raise OSError("no model here")

    embedder = LocalEmbedder(model_factory=broken)
    try:
        with caplog.at_level(logging.ERROR, logger="gateway.cache"):
            assert await embedder.embed("a") is None
            assert await embedder.embed("b") is None
        assert calls == [1] and embedder.stats.load_failed
        assert sum("failed to load" in r.getMessage() for r in caplog.records) == 1
    finally:
        await embedder.close()


async def test_a_failing_embedding_is_a_miss_not_an_error() -> None:
    class Failing(FakeModel):
        def embed(self, text: str) -> np.ndarray:
            raise ValueError("bad input")

    embedder = LocalEmbedder(model_factory=Failing)
    try:
        assert await embedder.embed("x") is None
        assert embedder.stats.failed == 1
    finally:
        await embedder.close()


def test_bad_pool_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        LocalEmbedder(threads=0)
    with pytest.raises(ValueError):
        LocalEmbedder(queue=-1)


@pytest.mark.serial  # a time bound that a busy machine could break
async def test_the_packaged_model_keeps_the_loop_responsive_while_it_embeds() -> None:
    """onnxruntime releases the GIL: loop ticks go on while a worker embeds long texts."""
    embedder = LocalEmbedder(threads=1, queue=64, timeout_s=60)
    try:
        assert await embedder.embed("warm up") is not None  # loads the model
        ticks = 0
        longest_gap = 0.0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks, longest_gap
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                longest_gap = max(longest_gap, now - last)
                last = now
                ticks += 1

        task = asyncio.ensure_future(ticker())
        started = time.perf_counter()
        vectors = await asyncio.gather(*(embedder.embed("a long text to embed " * 20 + str(i)) for i in range(16)))
        elapsed = time.perf_counter() - started
        done.set()
        await task
        assert all(v is not None for v in vectors)
        # a model that held the GIL would let the loop tick only between embeddings (about 16 times)
        assert ticks >= 4 * len(vectors), (ticks, elapsed)
        assert longest_gap < max(0.5, elapsed / 2)
    finally:
        await embedder.close()
