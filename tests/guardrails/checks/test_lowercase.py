"""default.alllowercase: every cased letter lowercase."""

from __future__ import annotations

from tests.guardrails.checks.subjects import param_fault, passes, prompt


def test_lowercase_passes_and_mixed_fails():
    assert passes("default.alllowercase", {}, prompt("hello, world 42!"))
    assert not passes("default.alllowercase", {}, prompt("hello World"))
    assert passes("default.alllowercase", {"not": True}, prompt("HELLO"))


def test_bad_parameter_is_named():
    assert param_fault("default.alllowercase", {"not": 1}) == "input_guardrails[0].default.alllowercase.not"
