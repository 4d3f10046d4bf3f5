"""The local embedding model's per-prompt cost: tokenizing (pure Python) and embedding, onnxruntime on 1 and 2 threads.

Run: ``python -m pytest bench/micro/test_embedding_bench.py --benchmark-enable``. Memory and pool throughput are
measured by ``bench/semantic_model.py``.
"""

from __future__ import annotations

import pytest

from gateway.cache.local_model import MiniLmModel
from gateway.cache.wordpiece import WordPieceTokenizer

SHORT = "How do I reset my password?"
LONG = "Please explain how the password reset flow works for enterprise accounts with single sign-on. " * 12
_models: dict[int, MiniLmModel] = {}


def model(threads: int) -> MiniLmModel:
    if threads not in _models:
        _models[threads] = MiniLmModel(intra_op_threads=threads)
    return _models[threads]


@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "128_tokens"])
def test_tokenize(benchmark, text: str) -> None:
    tokenizer = WordPieceTokenizer.packaged()
    ids = benchmark(tokenizer.encode, text)
    assert 9 <= len(ids) <= 128


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "128_tokens"])
def test_embed(benchmark, threads: int, text: str) -> None:
    m = model(threads)
    vector = benchmark(m.embed, text)
    assert vector.shape == (384,)
