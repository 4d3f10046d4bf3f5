"""Semantic lookup at 1k / 10k / 100k stored prompts, compiled vs pure, on one core (run with --benchmark-enable).

The stored vectors are real embedded prompts (bench/micro/semantic_corpus.py; the 100k corpus is embedded once,
minutes, and cached under .benchmarks/). Each benchmark times one ``SimilarityIndex.search`` per round, cycling
through the queries (half rewordings of stored prompts, half new prompts from the same templates), and records
in its extra info: the hit agreement with an exact float32 scan (same decision, and the same entry or one whose
float32 score ties it within 0.003), the hit rate, the cells, and bytes per stored entry. Without
--benchmark-enable (the test suite) every case runs once on a 300-prompt corpus.

Targets: p50 under 1 ms at 10,000 entries and under 2 ms at 100,000, agreement at least 99%. Make the 100k corpus
first (``python bench/micro/semantic_corpus.py 100000``, minutes): inside a benchmark it would outlast the
per-test timeout.
"""

from __future__ import annotations

import itertools
import os
from types import ModuleType

import numpy as np
import pytest
from semantic_corpus import Corpus, corpus

from gateway.cache import similarity as pure_similarity
from gateway.cache.index import SimilarityIndex
from tests.support.twins import compiled_twin

THRESHOLD = 0.89
SMOKE = 300
_built: dict[int, tuple[Corpus, SimilarityIndex, dict]] = {}


@pytest.fixture(params=["pure", "compiled"])
def kernels(request: pytest.FixtureRequest) -> ModuleType:
    return pure_similarity if request.param == "pure" else compiled_twin("similarity")


@pytest.fixture
def one_core():
    """Pin this process to one CPU for the measurement."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def agreement(data: Corpus, index: SimilarityIndex) -> dict:
    """How often the index answers what an exact float32 scan answers."""
    same_decision = same_entry = hits = 0
    queries = data.queries
    for start in range(0, len(queries), 100):
        exact = data.vectors @ queries[start : start + 100].T
        for j in range(exact.shape[1]):
            best = int(exact[:, j].argmax())
            should_hit = bool(exact[best, j] >= THRESHOLD)
            found = index.search(queries[start + j], THRESHOLD)
            hits += should_hit
            same_decision += (found is not None) == should_hit
            same_entry += (found is None and not should_hit) or (
                found is not None and should_hit and exact[best, j] - exact[found[0], j] < 0.003
            )
    n = len(queries)
    return {"queries": n, "exact_hit_rate": hits / n, "agreement_decision": same_decision / n,
            "agreement_entry": float(same_entry) / n}


def built(size: int) -> tuple[Corpus, SimilarityIndex, dict]:
    if size not in _built:
        data = corpus(size)
        index = SimilarityIndex(kernels=pure_similarity)
        for i, vector in enumerate(data.vectors):
            index.add(i, vector)
        info = {"entries": len(index), "cells": index.cells, "array_bytes_per_entry": round(index.nbytes() / size, 1)}
        _built[size] = (data, index, info)
    return _built[size]


@pytest.mark.parametrize("size", [1_000, 10_000, 100_000])
def test_search(benchmark, kernels: ModuleType, one_core, size: int) -> None:
    data, index, info = built(size if not benchmark.disabled else SMOKE)
    index._kernels = kernels
    quality = agreement(data, index)
    queries = itertools.cycle(list(data.queries))
    benchmark.extra_info.update({**info, **quality, "kernels": "pure" if kernels is pure_similarity else "compiled"})
    benchmark(lambda: index.search(next(queries), THRESHOLD))
    assert quality["agreement_decision"] >= 0.99 and quality["agreement_entry"] >= 0.99
    if not benchmark.disabled:
        print(f"\n{size} entries, {benchmark.extra_info['kernels']}: p50 {benchmark.stats.stats.median * 1e3:.3f} ms, "
              f"agreement {quality['agreement_entry']:.4f}, cells {info['cells']}, "
              f"{info['array_bytes_per_entry']} array bytes/entry")


@pytest.mark.parametrize("size", [10_000, 100_000])
def test_exact_float32_scan_for_comparison(benchmark, one_core, size: int) -> None:
    """What the index avoids: every stored float32 vector read per lookup (numpy's BLAS)."""
    data = corpus(size if not benchmark.disabled else SMOKE)
    matrix = np.ascontiguousarray(data.vectors)
    queries = itertools.cycle(list(data.queries))

    def scan() -> int:
        scores = matrix @ next(queries)
        best = int(scores.argmax())
        return best if scores[best] >= THRESHOLD else -1

    benchmark(scan)
    benchmark.extra_info["bytes_read_per_lookup"] = matrix.nbytes


def test_add(benchmark, one_core) -> None:
    """Inserting into a 10,000-entry index (splits included, amortised)."""
    data, _, _ = built(10_000 if not benchmark.disabled else SMOKE)
    index = SimilarityIndex()
    for i, vector in enumerate(data.vectors):
        index.add(i, vector)
    keys = itertools.count(len(data.vectors))
    vectors = itertools.cycle(list(data.queries))
    benchmark(lambda: index.add(next(keys), next(vectors)))
    assert len(index) > len(data.vectors)


def test_bytes_per_entry_with_keys(benchmark) -> None:
    """Everything an entry costs in the index, keys and key map included (20-character string keys)."""
    import tracemalloc

    data, _, _ = built(10_000 if not benchmark.disabled else SMOKE)
    keys = [f"entry-{i:014d}" for i in range(len(data.vectors))]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = SimilarityIndex()
    for key, vector in zip(keys, data.vectors):
        index.add(key, vector)
    per_entry = (tracemalloc.get_traced_memory()[0] - before) / len(keys)
    tracemalloc.stop()
    benchmark.extra_info["bytes_per_entry"] = round(per_entry, 1)
    benchmark(lambda: None)
    assert per_entry < 1536  # less than one float32 vector
    if not benchmark.disabled:
        print(f"\n{per_entry:.0f} bytes per entry, key map included (a float32 vector alone: 1536)")
