"""default.jsonSchema: JSON found in the text validated against a schema; unsafe schemas refused up front."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import answer, judge, param_fault, passes

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Ada", "age": 36}',
        'Here you go:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?',
        'Sure! {"name": "Ada", "age": 36} is the record.',
    ],
)
def test_matching_json_passes_wherever_it_sits_in_the_text(text):
    assert passes("default.jsonSchema", {"schema": SCHEMA}, answer(text))


def test_mismatching_json_fails_and_says_where():
    result = judge("default.jsonSchema", {"schema": SCHEMA}, answer('{"name": "Ada", "age": -1}'))
    assert result.verdict is False
    assert "$.age" in result.explanation


def test_text_without_json_fails_and_not_inverts():
    assert not passes("default.jsonSchema", {"schema": SCHEMA}, answer("no json here"))
    assert passes("default.jsonSchema", {"schema": SCHEMA, "not": True}, answer('{"name": 1}'))


@pytest.mark.parametrize(
    ("schema", "param"),
    [
        ({"type": "nonsense"}, "input_guardrails[0].default.jsonSchema.schema"),
        ({"$ref": "https://example.com/s.json"}, "input_guardrails[0].default.jsonSchema.schema.$ref"),
        ({"properties": {"a": {"pattern": "(a+)+$"}}},
         "input_guardrails[0].default.jsonSchema.schema.properties.a.pattern"),
        ("not an object", "input_guardrails[0].default.jsonSchema.schema"),
    ],
)
def test_unsafe_or_invalid_schemas_are_refused(schema, param):
    assert param_fault("default.jsonSchema", {"schema": schema}) == param


def test_local_references_work():
    schema = {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}}
    assert passes("default.jsonSchema", {"schema": schema}, answer("[1, 2, 3]"))
    assert not passes("default.jsonSchema", {"schema": schema}, answer('[1, "2"]'))
