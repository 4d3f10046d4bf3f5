"""The /v1/rerank body rules: every violation is a 400 that names the field."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.schema.rerank import RerankDocument, parse_rerank

BASE = {"model": "rerank-v3.5", "query": "capital of France", "documents": ["Paris is the capital of France."]}


def body(**changes) -> bytes:
    doc = {**BASE, **changes}
    return msgspec.json.encode({k: v for k, v in doc.items() if v is not ...})


def rejects(raw: bytes, param: str) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        parse_rerank(raw)
    assert info.value.status == 400
    assert info.value.param == param
    assert param.split("[")[0] in info.value.message
    return info.value


def test_minimal_body_gets_the_spec_defaults():
    req = parse_rerank(body())
    assert req.model == "rerank-v3.5" and req.query == "capital of France"
    assert req.return_documents is False
    assert req.top_n is None and req.max_tokens_per_doc is None and req.truncation is None


@pytest.mark.parametrize("field", ["model", "query", "documents"])
def test_required_fields(field):
    rejects(body(**{field: ...}), field)


def test_documents_need_at_least_one_item():
    rejects(body(documents=[]), "documents")


def test_documents_may_be_strings_or_objects_with_text_and_metadata():
    req = parse_rerank(body(documents=["plain", {"text": "object", "metadata": {"source": "wiki"}}]))
    assert req.documents[0] == "plain"
    assert req.documents[1] == RerankDocument("object", {"source": "wiki"})
    assert req.texts() == ["plain", "object"]


def test_document_object_needs_text():
    rejects(body(documents=[{"metadata": {"a": 1}}]), "documents[0].text")


def test_document_metadata_must_be_an_object():
    rejects(body(documents=["a", {"text": "b", "metadata": "x"}]), "documents[1].metadata")


def test_document_must_be_string_or_object():
    rejects(body(documents=[42]), "documents[0]")


@pytest.mark.parametrize("field", ["top_n", "max_tokens_per_doc"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "3"])
def test_counts_are_integers_of_at_least_one(field, value):
    rejects(body(**{field: value}), field)


@pytest.mark.parametrize("field", ["top_n", "max_tokens_per_doc"])
def test_counts_accept_one(field):
    assert getattr(parse_rerank(body(**{field: 1})), field) == 1


def test_return_documents_is_a_boolean():
    assert parse_rerank(body(return_documents=True)).return_documents is True
    rejects(body(return_documents="yes"), "return_documents")


def test_priority_is_a_number():
    assert parse_rerank(body(priority=2.5)).priority == 2.5
    rejects(body(priority="high"), "priority")


def test_rank_fields_is_a_list_of_strings():
    assert parse_rerank(body(rank_fields=["title", "text"])).rank_fields == ["title", "text"]
    rejects(body(rank_fields="title"), "rank_fields")
    rejects(body(rank_fields=["title", 3]), "rank_fields[1]")


def test_truncation_is_a_boolean():
    assert parse_rerank(body(truncation=False)).truncation is False
    rejects(body(truncation=1), "truncation")


def test_parameters_is_an_object():
    assert parse_rerank(body(parameters={"truncate": "END"})).parameters == {"truncate": "END"}
    rejects(body(parameters=["truncate"]), "parameters")


@pytest.mark.parametrize("field,value", [("model", 1), ("query", ["q"])])
def test_model_and_query_are_strings(field, value):
    rejects(body(**{field: value}), field)


def test_not_json_is_a_400():
    with pytest.raises(InvalidRequest) as info:
        parse_rerank(b"{not json")
    assert info.value.status == 400


def test_empty_body_is_a_400():
    with pytest.raises(InvalidRequest):
        parse_rerank(b"")
