"""default.allowedRequestTypes: endpoint allow and block lists."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import param_fault, passes, prompt


def test_allowed_and_blocked_types():
    assert passes("default.allowedRequestTypes", {"allowedTypes": ["chat"]}, prompt("hi"))
    assert not passes("default.allowedRequestTypes", {"allowedTypes": ["chat"]}, prompt("hi", "embeddings"))
    assert not passes("default.allowedRequestTypes", {"blockedTypes": ["completions"]}, prompt("hi", "completions"))
    assert passes("default.allowedRequestTypes", {"blockedTypes": ["completions"]}, prompt("hi", "embeddings"))


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "input_guardrails[0].default.allowedRequestTypes"),
        ({"allowedTypes": ["chat", "images"]}, "input_guardrails[0].default.allowedRequestTypes.allowedTypes[1]"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.allowedRequestTypes", params) == param
