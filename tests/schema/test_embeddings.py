"""The /v1/embeddings body rules: every violation is a 400 that names the field."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.schema.embeddings import parse_embeddings


def body(**fields) -> bytes:
    doc = {"model": "text-embedding-3-small", "input": "hello", **fields}
    return msgspec.json.encode({k: v for k, v in doc.items() if v is not ...})


def rejects(raw: bytes, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_embeddings(raw)
    assert info.value.status == 400
    assert info.value.param == param


@pytest.mark.parametrize("value", ["hello", ["a", "b"], [1, 2, 3], [[1, 2], [3]]])
def test_every_input_shape_is_accepted(value):
    assert parse_embeddings(body(input=value)).input == value


def test_texts_are_the_strings_or_none_for_tokens():
    assert parse_embeddings(body(input="x")).texts() == ["x"]
    assert parse_embeddings(body(input=["x", "y"])).texts() == ["x", "y"]
    assert parse_embeddings(body(input=[1, 2])).texts() is None
    assert parse_embeddings(body(input=[[1], [2]])).texts() is None


@pytest.mark.parametrize("field", ["model", "input"])
def test_required_fields(field):
    rejects(body(**{field: ...}), field)


@pytest.mark.parametrize("value", ["", []])
def test_input_must_not_be_empty(value):
    rejects(body(input=value), "input")


def test_no_empty_string_or_token_array_inside_the_input():
    rejects(body(input=["a", ""]), "input[1]")
    rejects(body(input=[[1], []]), "input[1]")


@pytest.mark.parametrize("value", [["a", 1], [1, [2]], [[1], 2], [[1], "a"]])
def test_input_must_be_one_consistent_shape(value):
    rejects(body(input=value), "input")


@pytest.mark.parametrize("value,param", [(5, "input"), ([{"text": "a"}], "input[0]"), ([["x"]], "input[0][0]")])
def test_input_items_of_the_wrong_type_are_named(value, param):
    rejects(body(input=value), param)


def test_encoding_format_is_float_or_base64():
    assert parse_embeddings(body(encoding_format="base64")).encoding_format == "base64"
    assert parse_embeddings(body(encoding_format="float")).encoding_format == "float"
    rejects(body(encoding_format="int8"), "encoding_format")


def test_dimensions_is_at_least_one():
    assert parse_embeddings(body(dimensions=1)).dimensions == 1
    rejects(body(dimensions=0), "dimensions")
    rejects(body(dimensions="256"), "dimensions")


def test_user_and_input_type_are_strings():
    req = parse_embeddings(body(user="u-1", input_type="search_query"))
    assert (req.user, req.input_type) == ("u-1", "search_query")
    rejects(body(user=7), "user")
    rejects(body(input_type=["query"]), "input_type")
