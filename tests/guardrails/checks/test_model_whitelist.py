"""default.modelWhitelist: the request's model must be listed."""

from __future__ import annotations

from tests.guardrails.checks.subjects import param_fault, passes, prompt


def test_listed_model_passes_and_other_fails():
    params = {"models": ["gpt-small", "gpt-large"]}
    assert passes("default.modelWhitelist", params, prompt("hi", model="gpt-small"))
    assert not passes("default.modelWhitelist", params, prompt("hi", model="gpt-huge"))
    assert passes("default.modelWhitelist", {**params, "not": True}, prompt("hi", model="gpt-huge"))


def test_empty_list_is_refused():
    assert param_fault("default.modelWhitelist", {"models": []}) == "input_guardrails[0].default.modelWhitelist.models"
