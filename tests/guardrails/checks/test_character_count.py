"""default.characterCount: code points, whitespace included."""

from __future__ import annotations

from tests.guardrails.checks.subjects import param_fault, passes, prompt


def test_bounds_pass_and_fail():
    params = {"minCharacters": 3, "maxCharacters": 5}
    assert passes("default.characterCount", params, prompt("a b c"))
    assert passes("default.characterCount", params, prompt("ééé"))
    assert not passes("default.characterCount", params, prompt("ab"))
    assert not passes("default.characterCount", params, prompt("abcdef"))
    assert passes("default.characterCount", {**params, "not": True}, prompt("abcdef"))


def test_bad_parameter_is_named():
    fault = param_fault("default.characterCount", {"maxCharacters": -2})
    assert fault == "input_guardrails[0].default.characterCount.maxCharacters"
