"""Embedded prompt corpora for the similarity benchmarks, made once and cached under .benchmarks/ (never committed).

``corpus(n)`` embeds ``n`` template prompts (tests/support/prompts.py) with the packaged model, and up to 1,000
queries: 500 rewordings of stored prompts (which should hit) and 500 new prompts from the same templates
(neighbours that differ by a value, the hard case); half of ``n`` of each for a small corpus. Embedding 100,000
prompts takes several minutes on 2 cores; later runs load
the vectors from ``.benchmarks/semantic-corpus-<n>-<digest>.npz``.

    python bench/micro/semantic_corpus.py 100000     # make (or check) the cached corpus ahead of a benchmark run
"""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.cache.local_model import MODEL_ID, MiniLmModel  # noqa: E402
from tests.support.prompts import prompts, reworded  # noqa: E402

CACHE = ROOT / ".benchmarks"
QUERIES = 500


class Corpus:
    """Stored vectors, query vectors, and which stored row each rewording came from (-1 for new prompts)."""

    def __init__(self, texts: list[str], vectors: np.ndarray, query_texts: list[str], queries: np.ndarray,
                 sources: np.ndarray) -> None:
        self.texts = texts
        self.vectors = vectors
        self.query_texts = query_texts
        self.queries = queries
        self.sources = sources


def _texts(n: int) -> tuple[list[str], list[str], np.ndarray]:
    count = min(QUERIES, n // 2)
    every = prompts(n + count, seed=1)
    texts, fresh = every[:n], every[n:]
    rng = random.Random(2)
    picked = rng.sample(range(n), count)
    query_texts = [reworded(texts[i], rng) for i in picked] + fresh
    sources = np.array(picked + [-1] * len(fresh), dtype=np.int64)
    return texts, query_texts, sources


def corpus(n: int, *, log: bool = True) -> Corpus:
    """The embedded corpus of ``n`` prompts (from the cache when it is there)."""
    texts, query_texts, sources = _texts(n)
    digest = hashlib.sha256("\n".join([MODEL_ID, *texts, *query_texts]).encode()).hexdigest()[:16]
    path = CACHE / f"semantic-corpus-{n}-{digest}.npz"
    if path.exists():
        data = np.load(path)
        return Corpus(texts, data["vectors"], query_texts, data["queries"], sources)
    if log:
        print(f"embedding {n} prompts once (cached in {path.name}) ...", file=sys.stderr, flush=True)
    model = MiniLmModel(intra_op_threads=2)
    vectors = model.embed_many(texts, batch=128)
    queries = model.embed_many(query_texts, batch=128)
    CACHE.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, vectors=vectors, queries=queries)
    tmp.replace(path)
    return Corpus(texts, vectors, query_texts, queries, sources)


if __name__ == "__main__":
    made = corpus(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
    print(f"{len(made.texts)} stored, {len(made.query_texts)} queries, {made.vectors.nbytes / 2**20:.1f} MiB")
