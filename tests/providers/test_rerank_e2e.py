"""POST /v1/rerank through the real gateway to the cohere, voyage and jina mocks: the unified rerank answer."""

from __future__ import annotations

import msgspec
import pytest

from gateway_mock.kit import count_tokens
from tests.support.http import post

# provider -> (path appended to the mock scenario base, a model name of that provider)
PROVIDERS = {
    "cohere": ("/v2", "rerank-v3.5"),
    "voyage": ("/voyage/v1", "rerank-2"),
    "jina": ("/jina/v1", "jina-reranker-v2-base-multilingual"),
}
QUERY = "What is the capital of France?"
DOCS = [
    "Berlin is the capital of Germany.",
    "Paris is the capital of France.",
    "The capital of France is Paris, a city on the Seine.",
    "Bananas are yellow.",
]
EXPECTED_ORDER = [1, 2, 0, 3]  # by word overlap with the query (the mocks' deterministic relevance)


@pytest.fixture
def rerank(gateway, mock, gw_headers):
    """POST a rerank body for ``provider`` to a fresh mock scenario; returns (response, upstream requests)."""

    def call(provider: str, steps: list[dict] | None = None, **fields):
        path, model = PROVIDERS[provider]
        base = mock.scenario(steps)
        body = {"model": model, "query": QUERY, "documents": DOCS, **fields}
        resp = post(f"{gateway.url}/v1/rerank", body, gw_headers(base + path, provider=provider))
        return resp, mock.calls(base)["requests"]

    return call


def sent(requests: list[dict]) -> dict:
    assert len(requests) == 1
    return msgspec.json.decode(requests[0]["body"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unified_answer_sorted_by_relevance(rerank, provider):
    resp, requests = rerank(provider)
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert list(doc) == ["object", "results", "model", "id", "usage", "provider"]
    assert doc["object"] == "list"
    assert doc["model"] == PROVIDERS[provider][1]
    assert doc["provider"] == provider
    assert isinstance(doc["id"], str) and doc["id"]
    assert [r["index"] for r in doc["results"]] == EXPECTED_ORDER
    scores = [r["relevance_score"] for r in doc["results"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    assert all("document" not in r for r in doc["results"])
    assert resp.headers["x-gateway-provider"] == provider
    assert sent(requests)["documents"] == DOCS


@pytest.mark.parametrize("provider", PROVIDERS)
def test_object_documents_are_sent_as_their_text(rerank, provider):
    objects = [{"text": text, "metadata": {"n": i}} for i, text in enumerate(DOCS)]
    resp, requests = rerank(provider, documents=[objects[0], DOCS[1], objects[2], objects[3]])
    assert resp.status == 200, resp.text
    assert sent(requests)["documents"] == DOCS
    assert [r["index"] for r in resp.json()["results"]] == EXPECTED_ORDER


@pytest.mark.parametrize("provider,field", [("cohere", "top_n"), ("voyage", "top_k"), ("jina", "top_n")])
def test_top_n_is_sent_under_the_providers_name(rerank, provider, field):
    resp, requests = rerank(provider, top_n=2)
    assert resp.status == 200, resp.text
    assert [r["index"] for r in resp.json()["results"]] == EXPECTED_ORDER[:2]
    upstream = sent(requests)
    assert upstream[field] == 2
    if field != "top_n":
        assert "top_n" not in upstream


@pytest.mark.parametrize("provider", PROVIDERS)
def test_return_documents_adds_each_documents_text(rerank, provider):
    documents = [DOCS[0], {"text": DOCS[1], "metadata": {"lang": "en"}}, DOCS[2], DOCS[3]]
    resp, requests = rerank(provider, documents=documents, return_documents=True)
    assert resp.status == 200, resp.text
    results = resp.json()["results"]
    assert [r["document"] for r in results] == [{"text": DOCS[i]} for i in EXPECTED_ORDER]
    upstream = sent(requests)
    if provider == "cohere":  # Cohere v2 has no return_documents: the gateway fills the documents in
        assert "return_documents" not in upstream
    else:
        assert upstream["return_documents"] is True


def test_jina_is_told_explicitly_not_to_return_documents(rerank):
    resp, requests = rerank("jina")
    assert resp.status == 200
    assert sent(requests)["return_documents"] is False


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_search_units(rerank, provider):
    resp, _ = rerank(provider)
    units = resp.json()["usage"]["search_units"]
    if provider == "cohere":
        assert units == 1  # meta.billed_units.search_units: one unit for up to 100 documents
    else:  # voyage and jina bill tokens: usage.total_tokens
        assert units == count_tokens(QUERY) * len(DOCS) + sum(count_tokens(d) for d in DOCS)


@pytest.mark.parametrize("model", ["cohere.rerank-v3.5", "cohere/rerank-v3.5"])
def test_cohere_strips_a_leading_provider_prefix_from_the_model(rerank, model):
    resp, requests = rerank("cohere", model=model)
    assert resp.status == 200, resp.text
    assert sent(requests)["model"] == "rerank-v3.5"
    assert resp.json()["model"] == model


@pytest.mark.parametrize("provider", ["voyage", "jina"])
def test_other_providers_get_the_model_name_as_sent(rerank, provider):
    resp, requests = rerank(provider, model="cohere.rerank-v3.5")
    assert resp.status == 200
    assert sent(requests)["model"] == "cohere.rerank-v3.5"


def test_provider_specific_fields_reach_the_provider_that_knows_them(rerank):
    _, requests = rerank("cohere", max_tokens_per_doc=512, priority=1, truncation=False, rank_fields=["text"])
    upstream = sent(requests)
    assert (upstream["max_tokens_per_doc"], upstream["priority"]) == (512, 1)
    assert "truncation" not in upstream and "rank_fields" not in upstream
    _, requests = rerank("voyage", truncation=False, max_tokens_per_doc=512)
    upstream = sent(requests)
    assert upstream["truncation"] is False and "max_tokens_per_doc" not in upstream


@pytest.mark.parametrize("provider", PROVIDERS)
def test_upstream_error_is_relayed_with_status_and_message(rerank, provider):
    resp, _ = rerank(provider, steps=[{"status": 429, "message": "slow down, please"}])
    assert resp.status == 429, resp.text
    doc = resp.json()
    assert doc["error"]["message"] == "slow down, please"
    assert doc["provider"] == provider


def test_upstream_auth_failure_is_relayed(gateway, mock, gw_headers):
    base = mock.scenario()
    headers = gw_headers(base + "/v2", provider="cohere")
    del headers["authorization"]  # no provider key: Cohere's own 401 comes back
    resp = post(f"{gateway.url}/v1/rerank", {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS}, headers)
    assert resp.status == 401, resp.text
    assert resp.json()["error"]["message"] == "invalid api token"
    assert resp.json()["provider"] == "cohere"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_html_answer_is_a_502_naming_the_provider(rerank, provider):
    resp, _ = rerank(provider, steps=[{"html": True}])
    assert resp.status == 502
    assert provider in resp.json()["error"]["message"]


def test_invalid_body_is_a_400_and_nothing_is_sent_upstream(rerank):
    resp, requests = rerank("cohere", top_n=0)
    assert resp.status == 400
    assert resp.json()["error"]["param"] == "top_n"
    assert requests == []


def test_provider_without_rerank_is_a_400_naming_provider(gateway, mock, gw_headers):
    resp = post(f"{gateway.url}/v1/rerank", {"model": "m", "query": QUERY, "documents": DOCS},
                gw_headers(mock.url + "/v1"))
    assert resp.status == 400
    assert resp.json()["error"]["param"] == "provider"


@pytest.mark.parametrize("provider,dropped", [
    ("cohere", "truncation,rank_fields,parameters"),
    ("voyage", "max_tokens_per_doc,priority,rank_fields,parameters"),
    ("jina", "max_tokens_per_doc,priority,truncation,rank_fields,parameters"),
])
def test_fields_a_provider_does_not_take_are_named_in_the_dropped_params_header(rerank, provider, dropped):
    resp, _ = rerank(provider, max_tokens_per_doc=512, priority=1, truncation=False, rank_fields=["text"],
                     parameters={"a": 1})
    assert resp.status == 200 and resp.headers["x-gateway-dropped-params"] == dropped
    plain, _ = rerank(provider, top_n=2, return_documents=True)
    assert plain.status == 200 and "x-gateway-dropped-params" not in plain.headers
