"""default.contains: any / all / none of the words, exact case-sensitive substrings."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import answer, param_fault, passes

TEXT = "Our product beats CompetitorA on price."


@pytest.mark.parametrize(
    ("operator", "words", "expected"),
    [
        ("any", ["CompetitorA", "CompetitorB"], True),
        ("any", ["CompetitorB", "CompetitorC"], False),
        ("all", ["CompetitorA", "price"], True),
        ("all", ["CompetitorA", "CompetitorB"], False),
        ("none", ["CompetitorB"], True),
        ("none", ["CompetitorB", "CompetitorA"], False),
        ("none", ["competitora"], True),  # case-sensitive
    ],
)
def test_operators(operator, words, expected):
    assert passes("default.contains", {"words": words, "operator": operator}, answer(TEXT)) is expected


def test_operator_defaults_to_any():
    assert passes("default.contains", {"words": ["price"]}, answer(TEXT))


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"operator": "any"}, "input_guardrails[0].default.contains.words"),
        ({"words": []}, "input_guardrails[0].default.contains.words"),
        ({"words": ["a", ""]}, "input_guardrails[0].default.contains.words[1]"),
        ({"words": ["a"], "operator": "some"}, "input_guardrails[0].default.contains.operator"),
        ({"words": "a"}, "input_guardrails[0].default.contains.words"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.contains", params) == param
