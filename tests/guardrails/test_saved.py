"""Saved guardrail records: create and update validation naming fields, and paging with an ids filter."""

from __future__ import annotations

import json

import pytest

from gateway.guardrails.saved import (
    PAGE_SIZE_DEFAULT,
    encode_page,
    list_page,
    new_guardrail,
    parse_create,
    parse_list_query,
    parse_update,
    updated_guardrail,
)
from gateway.http.errors import InvalidRequest

BODY = {"name": "no secrets", "checks": [{"id": "default.regexMatch", "parameters": {"rule": "sk-[a-z0-9]+"}}],
        "deny": True, "on_fail": {"feedback": {"value": -1, "weight": 1, "metadata": {"why": "secret"}}}}


def bad(raw) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        parse_create(raw)
    assert info.value.status == 400
    return info.value


def test_create_makes_a_record_and_it_encodes_with_async_spelled_as_on_the_wire():
    record = new_guardrail(parse_create(json.dumps(BODY).encode()), "ws1")
    assert record.workspace_id == "ws1" and record.id == ""  # the repository gives the id and timestamps
    doc = json.loads(encode_page(list_page([record], parse_list_query({}))))["data"][0]
    assert doc["async"] is False and doc["deny"] is True and doc["checks"][0]["parameters"] == {"rule": "sk-[a-z0-9]+"}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({**BODY, "name": " "}, "name"),
        ({**BODY, "checks": []}, "checks"),
        ({**BODY, "checks": [{"id": "default.regexMatch", "parameters": {"rule": "(a+)+"}}]},
         "checks[0].parameters.rule"),
        ({**BODY, "checks": [{"id": "nope", "parameters": {}}]}, "checks[0].id"),
        ({**BODY, "checks": [{"parameters": {}}]}, "checks[0].id"),
        ({**BODY, "async": True}, "async"),
        ({**BODY, "on_fail": {"feedback": {"value": "x"}}}, "on_fail.feedback.value"),
        ({**BODY, "colour": "red"}, "colour"),
        ({**BODY, "workspace_id": ""}, "workspace_id"),
    ],
)
def test_bad_bodies_name_the_field(body, param):
    assert bad(body).param == param


def test_bodies_that_are_not_objects_are_refused():
    assert bad(b"not json").param == "body"
    assert bad(b"[1]").param == "body"


def test_update_merges_and_validates():
    record = new_guardrail(parse_create(BODY), "ws1", guardrail_id="gr_1", created_at="2026-01-01T00:00:00.000Z")
    changed = updated_guardrail(record, parse_update(b'{"name": "renamed", "deny": false}'))
    assert changed.name == "renamed" and changed.deny is False and changed.checks == record.checks
    assert changed.created_at == record.created_at and changed.id == record.id
    with pytest.raises(InvalidRequest) as info:
        updated_guardrail(record, parse_update({"async": True}))
    assert info.value.param == "async"  # async with the record's deny: true


def records(n: int, workspace: str = "ws1"):
    return [new_guardrail(parse_create(BODY), workspace, guardrail_id=f"gr_{i:02d}",
                          created_at=f"2026-01-01T00:00:{i:02d}.000Z") for i in range(n)]


def test_paging_newest_first():
    every = records(5) + records(2, "other")
    first = list_page(every, parse_list_query({"page_size": "2"}), "ws1")
    assert [r.id for r in first.data] == ["gr_04", "gr_03"] and first.total == 5 and first.has_more
    last = list_page(every, parse_list_query({"page_size": "2", "current_page": "2"}), "ws1")
    assert [r.id for r in last.data] == ["gr_00"] and not last.has_more
    beyond = list_page(every, parse_list_query({"page_size": "2", "current_page": "9"}), "ws1")
    assert beyond.data == [] and beyond.total == 5
    assert list_page(every, parse_list_query({}), "ws1").page_size == PAGE_SIZE_DEFAULT


def test_ids_filter():
    page = list_page(records(5), parse_list_query({"ids": "gr_01, gr_03,,gr_99"}))
    assert [r.id for r in page.data] == ["gr_03", "gr_01"] and page.total == 2


@pytest.mark.parametrize(
    ("query", "param"),
    [({"current_page": "-1"}, "current_page"), ({"current_page": "x"}, "current_page"),
     ({"page_size": "0"}, "page_size"), ({"page_size": "100000"}, "page_size"), ({"ids": " , "}, "ids")],
)
def test_bad_list_queries_name_the_parameter(query, param):
    with pytest.raises(InvalidRequest) as info:
        parse_list_query(query)
    assert info.value.param == param
