"""The one reading of msgspec's decode errors (gateway/http/fields.py): each kind of fault, its JSON path joined
under where the value sits, and the words every route puts after ``<path>: ``."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from gateway.http.fields import DecodeFault, join_path, kind_words, problem_words, read_fault


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    count: Annotated[int, msgspec.Meta(ge=1)]
    name: str = ""


class Outer(msgspec.Struct, forbid_unknown_fields=True):
    items: list[Inner]
    labels: dict[str, int] = {}


def fault_of(doc: object, base: str = "") -> DecodeFault:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(doc, Outer)
    return read_fault(caught.value, base)


@pytest.mark.parametrize(("doc", "kind", "path", "words"), [
    ({"items": [{"count": 1, "extra": 1}]}, "unknown", "items[0].extra", "unknown key"),
    ({"items": [{}]}, "missing", "items[0].count", "is required"),
    ({"items": [{"count": "x"}]}, "type", "items[0].count", "must be an integer, got a string"),
    ({"items": [{"count": 0}]}, "invalid", "items[0].count", "must be an integer >= 1"),
    ({"items": [], "labels": {"a": "x"}}, "type", "labels", "must be an integer, got a string"),  # no "[...]"
    ([], "type", "", "must be an object, got an array"),
])
def test_each_fault_names_its_path_and_says_what_is_wrong_in_one_wording(doc, kind, path, words):
    fault = fault_of(doc)
    assert (fault.kind, fault.path, problem_words(fault)) == (kind, path, words)


def test_a_fault_is_placed_under_where_the_value_sits():
    placed = fault_of({"items": [{}]}, "input_guardrails[0].default.x")
    assert placed.path == "input_guardrails[0].default.x.items[0].count"
    assert fault_of([], "targets[1]").path == "targets[1]"


@pytest.mark.parametrize(("base", "tail", "joined"), [
    ("", "a", "a"), ("a", "", "a"), ("a", "b", "a.b"), ("a", ".b", "a.b"), ("a", "[0]", "a[0]"),
    ("a[0]", "b.c[1]", "a[0].b.c[1]"), ("", ".b", "b"),
])
def test_json_paths_join_one_way(base, tail, joined):
    assert join_path(base, tail) == joined


def test_types_read_as_words():
    assert kind_words("int | null") == "an integer"
    assert kind_words("int | float") == "a number"
    assert kind_words("str | array") == "a string or an array"
