"""default.jsonKeys: top-level keys of the JSON object in the text."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import answer, param_fault, passes

TEXT = 'Result: {"id": 1, "name": "x"}'


@pytest.mark.parametrize(
    ("operator", "keys", "expected"),
    [
        ("any", ["id", "missing"], True),
        ("any", ["missing"], False),
        ("all", ["id", "name"], True),
        ("all", ["id", "missing"], False),
        ("none", ["secret"], True),
        ("none", ["name"], False),
    ],
)
def test_operators(operator, keys, expected):
    assert passes("default.jsonKeys", {"keys": keys, "operator": operator}, answer(TEXT)) is expected


def test_no_json_object_fails():
    assert not passes("default.jsonKeys", {"keys": ["id"], "operator": "none"}, answer("[1, 2]"))


def test_bad_parameter_is_named():
    assert param_fault("default.jsonKeys", {"keys": []}) == "input_guardrails[0].default.jsonKeys.keys"
