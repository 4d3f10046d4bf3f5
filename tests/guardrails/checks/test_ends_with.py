"""default.endsWith: the text's end, trailing whitespace ignored."""

from __future__ import annotations

from tests.guardrails.checks.subjects import answer, param_fault, passes

DISCLAIMER = "This is not legal advice."


def test_suffix_passes_and_missing_suffix_fails():
    assert passes("default.endsWith", {"suffix": DISCLAIMER}, answer(f"You may sue.\n{DISCLAIMER}\n  "))
    assert not passes("default.endsWith", {"suffix": DISCLAIMER}, answer("You may sue."))
    assert passes("default.endsWith", {"suffix": DISCLAIMER, "not": True}, answer("You may sue."))


def test_blank_suffix_is_refused():
    assert param_fault("default.endsWith", {"suffix": "  "}) == "input_guardrails[0].default.endsWith.suffix"
