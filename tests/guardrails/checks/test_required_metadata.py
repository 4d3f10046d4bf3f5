"""default.requiredMetadataKeys: required keys (all/any/none) and values by matchType."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import judge, param_fault, passes, prompt

META = {"team": "search-infra", "env": "prod", "tier": 3}


def subject(metadata=META):
    return prompt("hi", metadata=metadata)


@pytest.mark.parametrize(
    ("operator", "keys", "expected"),
    [
        ("all", ["team", "env"], True),
        ("all", ["team", "user"], False),
        ("any", ["user", "env"], True),
        ("any", ["user"], False),
        ("none", ["user"], True),
        ("none", ["env"], False),
    ],
)
def test_keys_by_operator(operator, keys, expected):
    assert passes("default.requiredMetadataKeys", {"metadataKeys": keys, "operator": operator}, subject()) is expected


@pytest.mark.parametrize(
    ("match_type", "metadata", "expected"),
    [
        ("exact", {"env": "prod"}, True),
        ("exact", {"env": ["staging", "prod"]}, True),
        ("exact", {"env": "pro"}, False),
        ("exact", {"tier": "3"}, True),  # non-strings compare in their JSON form
        ("contains", {"team": "search"}, True),
        ("contains", {"team": ["ads", "infra"]}, True),
        ("contains", {"team": "ads"}, False),
        ("containsAll", {"team": ["search", "infra"]}, True),
        ("containsAll", {"team": ["search", "ads"]}, False),
        ("regex", {"team": "^search-"}, True),
        ("regex", {"team": ["^ads", "infra$"]}, True),
        ("regex", {"team": "^infra"}, False),
        ("exact", {"missing": "x"}, False),
    ],
)
def test_values_by_match_type(match_type, metadata, expected):
    params = {"metadata": metadata, "matchType": match_type}
    assert passes("default.requiredMetadataKeys", params, subject()) is expected


def test_failure_explains_and_not_inverts():
    result = judge("default.requiredMetadataKeys", {"metadataKeys": ["user"]}, subject())
    assert result.verdict is False and "user" in result.explanation
    assert passes("default.requiredMetadataKeys", {"metadataKeys": ["user"], "not": True}, subject())
    assert not passes("default.requiredMetadataKeys", {"metadataKeys": ["user"]}, subject(metadata={}))


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "input_guardrails[0].default.requiredMetadataKeys"),
        ({"metadataKeys": []}, "input_guardrails[0].default.requiredMetadataKeys.metadataKeys"),
        ({"metadata": {"a": "x"}, "matchType": "fuzzy"}, "input_guardrails[0].default.requiredMetadataKeys.matchType"),
        ({"metadata": {"a": "(x+)+"}, "matchType": "regex"},
         "input_guardrails[0].default.requiredMetadataKeys.metadata.a"),
        ({"metadata": {"a": ["ok", "(y*)*"]}, "matchType": "regex"},
         "input_guardrails[0].default.requiredMetadataKeys.metadata.a[1]"),
        ({"metadata": {"a": 5}}, "input_guardrails[0].default.requiredMetadataKeys.metadata.a"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.requiredMetadataKeys", params) == param
