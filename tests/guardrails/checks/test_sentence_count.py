"""default.sentenceCount: sentences end at . ! ? before whitespace or the end."""

from __future__ import annotations

import pytest

from gateway.guardrails.checks.sentence_count import sentence_count
from tests.guardrails.checks.subjects import answer, param_fault, passes


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("Hello world", 1), ("Hi. There!", 2), ("Pi is 3.14 roughly. Yes?", 2), ("Wait... what?! Ok", 3)],
)
def test_sentence_counting(text, count):
    assert sentence_count(text) == count


def test_bounds_pass_and_fail():
    params = {"minSentences": 1, "maxSentences": 2}
    assert passes("default.sentenceCount", params, answer("One. Two."))
    assert not passes("default.sentenceCount", params, answer("One. Two. Three."))
    assert not passes("default.sentenceCount", params, answer(""))
    assert passes("default.sentenceCount", {**params, "not": True}, answer("One. Two. Three."))


def test_min_above_max_is_refused():
    fault = param_fault("default.sentenceCount", {"minSentences": 3, "maxSentences": 1})
    assert fault == "input_guardrails[0].default.sentenceCount.maxSentences"
