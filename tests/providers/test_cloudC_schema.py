"""JSON Schema -> the generateContent Schema: what pydantic and hand-written schemas hold is translated or left out."""

from __future__ import annotations

from typing import Literal

import msgspec
from pydantic import BaseModel

from gateway.providers.cloudC.schema import FIELDS, openapi_schema


class Leaf(BaseModel):
    value: int


class Tree(BaseModel):
    name: str
    leaf: Leaf
    maybe: Leaf | None = None
    kind: Literal["oak"]
    children: list[Tree] = []


def keys(schema) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties":
                for sub in value.values():
                    found |= keys(sub)
            else:
                found.add(key)
                found |= keys(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= keys(item)
    return found


def test_a_schema_of_known_fields_is_the_same_object():
    schema = {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]},
                                               "additionalProperties": {"type": "string"}}, "required": ["a"]}
    assert openapi_schema(schema) is schema


def test_pydantic_refs_are_inlined_and_only_schema_fields_remain():
    out = openapi_schema(Tree.model_json_schema())
    assert keys(out) <= FIELDS
    assert out["properties"]["leaf"] == {"properties": {"value": {"title": "Value", "type": "integer"}},
                                         "required": ["value"], "title": "Leaf", "type": "object"}
    assert out["properties"]["maybe"]["nullable"] is True and out["properties"]["maybe"]["type"] == "object"
    assert out["properties"]["kind"]["enum"] == ["oak"]
    # the recursion stops where a definition refers back to itself
    assert out["properties"]["children"]["items"] == {"type": "object"}


def test_type_lists_one_of_and_all_of():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "additionalProperties": False, "properties": {"n": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                             "u": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                             "m": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                                              "required": ["a"]},
                                             {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}}}
    out = openapi_schema(schema)
    assert out == {"type": "object", "properties": {
        "n": {"type": "integer", "nullable": True},
        "u": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "m": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "required": ["a", "b"]}}}
    assert msgspec.json.encode(out)  # plain JSON all the way down
