"""The default threshold, measured on the labelled pairs with the packaged model, and its setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway import settings as settings_module
from gateway.cache.literals import same_literals
from gateway.cache.local_model import MiniLmModel

PAIRS = json.loads((Path(__file__).parent / "data" / "semantic_pairs.json").read_text())
DEFAULT = settings_module.Settings().semantic_cache_threshold


@pytest.fixture(scope="module")
def scores() -> tuple[list[float], list[float]]:
    model = MiniLmModel()

    def score(a: str, b: str) -> float:
        return float(model.embed(a) @ model.embed(b))

    return [score(a, b) for a, b, _ in PAIRS["paraphrase"]], [score(a, b) for a, b, _, _ in PAIRS["different"]]


def test_the_recorded_figures_are_what_the_packaged_model_gives(scores) -> None:
    paraphrase, different = scores
    assert len(paraphrase) >= 40 and len(different) >= 40
    recorded = [s for *_, s in PAIRS["paraphrase"]] + [s for *_, s in PAIRS["different"]]
    assert max(abs(a - b) for a, b in zip(paraphrase + different, recorded)) < 0.01


def test_at_the_default_threshold_paraphrases_hit_and_different_questions_miss(scores) -> None:
    paraphrase, different = scores
    para_hits = sum(s >= DEFAULT and same_literals(a, b) for s, (a, b, _) in zip(paraphrase, PAIRS["paraphrase"]))
    wrong = [(a, b, kind) for s, (a, b, kind, _) in zip(different, PAIRS["different"])
             if s >= DEFAULT and same_literals(a, b)]
    assert para_hits >= 0.7 * len(paraphrase)
    # the wrong hits left differ by one word or by word order (enable/disable, by value/by key, string to integer
    # vs integer to string): no threshold that keeps most paraphrases tells them apart
    assert len(wrong) <= 3 and all(kind == "topic" for _, _, kind in wrong), wrong
    assert all(s < 0.2 for s, (_, _, kind, _) in zip(different, PAIRS["different"]) if kind == "unrelated")


def test_the_threshold_is_read_from_the_environment() -> None:
    assert DEFAULT == 0.89
    assert settings_module.load({"GATEWAY_SEMANTIC_CACHE_THRESHOLD": "0.93"}).semantic_cache_threshold == 0.93
    for bad in ("1.5", "0", "abc"):
        with pytest.raises(ValueError, match="GATEWAY_SEMANTIC_CACHE_THRESHOLD"):
            settings_module.load({"GATEWAY_SEMANTIC_CACHE_THRESHOLD": bad})
    with pytest.raises(ValueError, match="GATEWAY_SEMANTIC_CACHE_THREADS"):
        settings_module.load({"GATEWAY_SEMANTIC_CACHE_THREADS": "0"})
    with pytest.raises(ValueError, match="GATEWAY_SEMANTIC_CACHE_QUEUE"):
        settings_module.load({"GATEWAY_SEMANTIC_CACHE_QUEUE": "-1"})
