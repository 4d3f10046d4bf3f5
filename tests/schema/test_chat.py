"""The chat body's response_format and metadata checks: the rules every provider gets, run when the body is
decoded."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.schema.chat import parse_chat

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def chat(**fields) -> bytes:
    return msgspec.json.encode({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})


@pytest.mark.parametrize("fmt", [
    {"type": "text"},
    {"type": "json_object"},
    {"type": "json_schema", "json_schema": {"name": "a-Z_09", "schema": SCHEMA}},
    {"type": "json_schema", "json_schema": {"name": "x" * 64, "schema": {}, "strict": True, "description": "d"}},
    {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strict": None}},
    {"type": "json_object", "other": 1},  # members the check does not know pass through
])
def test_good_formats_decode(fmt):
    assert parse_chat(chat(response_format=fmt)).response_format == fmt


@pytest.mark.parametrize("fmt,param", [
    ({}, "response_format.type"),
    ({"type": "xml"}, "response_format.type"),
    ({"type": 1}, "response_format.type"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": []}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": SCHEMA}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "", "schema": SCHEMA}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "a.b", "schema": SCHEMA}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "x" * 65, "schema": SCHEMA}},
     "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "x"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": True}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strict": 1}},
     "response_format.json_schema.strict"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "description": 2}},
     "response_format.json_schema.description"),
])
def test_bad_formats_are_400s_naming_the_field(fmt, param):
    with pytest.raises(InvalidRequest) as info:
        parse_chat(chat(response_format=fmt))
    assert info.value.status == 400 and info.value.param == param and param in info.value.message


def test_a_format_that_is_not_an_object_is_a_400_naming_it():
    with pytest.raises(InvalidRequest) as info:
        parse_chat(chat(response_format="json"))
    assert info.value.param == "response_format"


def test_metadata_within_the_limits_decodes():
    pairs = {f"{i:02d}" + "k" * 62: "v" * 512 for i in range(16)}
    assert parse_chat(chat(metadata=pairs)).metadata == pairs


@pytest.mark.parametrize("metadata,param", [
    ({f"k{i}": "v" for i in range(17)}, "metadata"),
    ({"k" * 65: "v"}, "metadata." + "k" * 64),
    ({"ticket": "x" * 513}, "metadata.ticket"),
    ({"ticket": 42}, "metadata.ticket"),
    ([["ticket", "42"]], "metadata"),
])
def test_metadata_beyond_the_spec_limits_is_a_400_naming_it(metadata, param):
    with pytest.raises(InvalidRequest) as caught:
        parse_chat(chat(metadata=metadata))
    assert caught.value.status == 400 and caught.value.param == param
