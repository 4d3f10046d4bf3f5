"""default.alluppercase: every cased letter uppercase."""

from __future__ import annotations

from tests.guardrails.checks.subjects import param_fault, passes, prompt


def test_uppercase_passes_and_mixed_fails():
    assert passes("default.alluppercase", {}, prompt("HELLO, WORLD 42!"))
    assert not passes("default.alluppercase", {}, prompt("Hello"))
    assert not passes("default.alluppercase", {}, prompt("1234"))
    assert passes("default.alluppercase", {"not": True}, prompt("Hello"))


def test_unknown_parameter_is_named():
    assert param_fault("default.alluppercase", {"x": 1}) == "input_guardrails[0].default.alluppercase.x"
