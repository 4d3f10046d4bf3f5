"""The packaged model embeds on this machine with nothing downloaded: unit vectors that rank meaning."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.cache import local_model
from gateway.cache.local_model import DIMENSIONS, MiniLmModel


@pytest.fixture(scope="module")
def model() -> MiniLmModel:
    return MiniLmModel()


def test_vectors_are_unit_float32_of_384(model: MiniLmModel) -> None:
    vector = model.embed("What is the capital of France?")
    assert vector.shape == (DIMENSIONS,) and vector.dtype == np.float32
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_a_paraphrase_scores_far_above_an_unrelated_question(model: MiniLmModel) -> None:
    base = model.embed("How do I reset my password?")
    paraphrase = float(base @ model.embed("I forgot my password, how can I change it?"))
    unrelated = float(base @ model.embed("What is the capital of France?"))
    assert paraphrase > 0.85 and unrelated < 0.3


def test_batched_vectors_equal_single_ones(model: MiniLmModel) -> None:
    texts = ["Hi", "Write a haiku about the sea", "Explain TCP congestion control to a five-year-old, please"]
    batch = model.embed_many(texts)
    for text, row in zip(texts, batch):
        assert float(row @ model.embed(text)) > 0.999


def test_long_text_embeds_within_the_window(model: MiniLmModel) -> None:
    long = model.embed("word " * 1000)
    assert long.shape == (DIMENSIONS,) and np.isfinite(long).all()


def test_a_model_file_that_is_not_the_pinned_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "MODEL_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="sha256"):
        MiniLmModel()
