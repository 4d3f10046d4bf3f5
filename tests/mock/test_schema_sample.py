"""The mock's schema sampler: the values it makes satisfy the schemas client libraries send."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from gateway_mock.schema_sample import SAMPLE_STRING, sample


class Address(BaseModel):
    street: str
    zip_code: int | None = None


class Person(BaseModel):
    name: str
    age: int
    height: float
    admin: bool
    role: Literal["owner", "guest"]
    tags: list[str]
    home: Address
    friends: list[Person] = []


def test_a_pydantic_model_schema_gives_a_valid_instance():
    value = sample(Person.model_json_schema())
    person = Person.model_validate(value)
    assert person.name == SAMPLE_STRING and person.role == "owner" and person.home.street == SAMPLE_STRING


def test_formats_enums_and_lengths():
    schema = {"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"}, "code": {"type": "string", "minLength": 9},
        "level": {"type": "integer", "enum": [3, 4]}, "n": {"type": ["null", "number"], "minimum": 5},
        "fixed": {"const": "x"}, "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}}]}}}
    assert sample(schema) == {"when": "2024-01-02T03:04:05Z", "code": "Parisxxxx", "level": 3, "n": 5,
                              "fixed": "x", "both": {"a": True}}


@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"type": "object", "additionalProperties": True}, None])
def test_a_schema_with_nothing_to_go_on_gives_an_answer_object(schema):
    assert sample(schema) == {"answer": SAMPLE_STRING}


def test_a_closed_empty_object_stays_empty():
    assert sample({"type": "object", "properties": {}, "additionalProperties": False}) == {}
    with pytest.raises(ValidationError):
        Person.model_validate(sample({"type": "object"}))
