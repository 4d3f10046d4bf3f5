"""default.wordCount: bounds inclusive, ``not`` inverts, min > max refused."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import judge, param_fault, passes, prompt


def test_counts_within_bounds_pass_and_outside_fail():
    params = {"minWords": 2, "maxWords": 4}
    assert passes("default.wordCount", params, prompt("one two"))
    assert passes("default.wordCount", params, prompt("one  two\nthree\tfour"))
    assert not passes("default.wordCount", params, prompt("one"))
    assert not passes("default.wordCount", params, prompt("one two three four five"))


def test_no_max_means_no_upper_bound_and_not_inverts():
    assert passes("default.wordCount", {"minWords": 1}, prompt("word " * 5000))
    assert not passes("default.wordCount", {"minWords": 1, "maxWords": 3, "not": True}, prompt("a b"))
    assert judge("default.wordCount", {"maxWords": 3}, prompt("a b")).data == {"count": 2}


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"minWords": -1}, "input_guardrails[0].default.wordCount.minWords"),
        ({"minWords": "3"}, "input_guardrails[0].default.wordCount.minWords"),
        ({"minWords": 1.5}, "input_guardrails[0].default.wordCount.minWords"),
        ({"minWords": 5, "maxWords": 2}, "input_guardrails[0].default.wordCount.maxWords"),
        ({"maxwords": 2}, "input_guardrails[0].default.wordCount.maxwords"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.wordCount", params) == param
