"""default.regexMatch: a match passes, no match fails, ``not`` inverts, dangerous patterns are refused."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import answer, param_fault, passes, prompt

CARD = r"\d{4}-\d{4}-\d{4}-\d{4}"


def test_a_matching_text_passes_and_other_text_fails():
    assert passes("default.regexMatch", {"rule": CARD}, prompt("pay 1234-5678-9012-3456 now"))
    assert not passes("default.regexMatch", {"rule": CARD}, prompt("nothing to see"))


def test_not_inverts_the_verdict():
    assert not passes("default.regexMatch", {"rule": CARD, "not": True}, answer("card 1234-5678-9012-3456"))
    assert passes("default.regexMatch", {"rule": CARD, "not": True}, answer("no card"))


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "input_guardrails[0].default.regexMatch.rule"),
        ({"rule": "(a+)+$"}, "input_guardrails[0].default.regexMatch.rule"),
        ({"rule": "("}, "input_guardrails[0].default.regexMatch.rule"),
        ({"rule": "x", "not": "yes"}, "input_guardrails[0].default.regexMatch.not"),
        ({"rule": "x", "rules": "y"}, "input_guardrails[0].default.regexMatch.rules"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.regexMatch", params) == param
