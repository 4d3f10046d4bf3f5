"""POST /v1/embeddings through the real gateway: vendorA (official SDK) and cohere, voyage, jina (vendorA's list)."""

from __future__ import annotations

import base64
import struct

import msgspec
import pytest

from gateway_mock.kit import count_tokens
from gateway_mock.vendorA import embedding_vector
from tests.support.http import post

# provider -> (path appended to the mock scenario base, an embedding model of that provider)
PROVIDERS = {
    "cohere": ("/v2", "embed-v4.0"),
    "voyage": ("/voyage/v1", "voyage-3.5"),
    "jina": ("/jina/v1", "jina-embeddings-v3"),
}
TEXTS = ["The quick brown fox", "jumps over the lazy dog"]


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) < 1e-6 for x, y in zip(a, b))


@pytest.fixture
def embed(gateway, mock, gw_headers):
    """POST an embeddings body for ``provider``; returns (response, upstream requests)."""

    def call(provider: str, steps: list[dict] | None = None, **fields):
        path, model = PROVIDERS[provider]
        base = mock.scenario(steps)
        body = {"model": model, "input": TEXTS, **fields}
        resp = post(f"{gateway.url}/v1/embeddings", body, gw_headers(base + path, provider=provider))
        return resp, mock.calls(base)["requests"]

    return call


def sent(requests: list[dict]) -> dict:
    assert len(requests) == 1
    return msgspec.json.decode(requests[0]["body"])


# --- vendorA through the official SDK ---------------------------------------------------------------------------

def test_vendorA_sdk_gets_embeddings(openai_client):
    client = openai_client()
    result = client.embeddings.create(model="text-embedding-3-small", input=TEXTS)
    assert [d.index for d in result.data] == [0, 1]
    assert close(result.data[0].embedding, embedding_vector(TEXTS[0]))
    assert result.model == "text-embedding-3-small"
    assert result.usage.prompt_tokens == sum(count_tokens(t) for t in TEXTS)


def test_vendorA_sdk_float_format_and_dimensions(openai_client):
    client = openai_client()
    result = client.embeddings.create(model="text-embedding-3-large", input="hello", encoding_format="float",
                                      dimensions=64)
    assert len(result.data[0].embedding) == 64
    assert close(result.data[0].embedding, embedding_vector("hello", 64))


def test_vendorA_sdk_token_input(openai_client):
    client = openai_client()
    result = client.embeddings.create(model="text-embedding-3-small", input=[[1, 2, 3], [4, 5]],
                                      encoding_format="float")
    assert len(result.data) == 2
    assert result.usage.prompt_tokens == 5


def test_vendorA_invalid_body_never_reaches_upstream(gateway, mock, gw_headers):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/embeddings", {"model": "m", "input": ""}, gw_headers(base + "/v1"))
    assert resp.status == 400
    assert resp.json()["error"]["param"] == "input"
    assert mock.calls(base)["calls"] == 0


# --- cohere, voyage, jina ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_answer_is_vendorA_embedding_list(embed, provider):
    resp, _ = embed(provider)
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert doc["object"] == "list"
    assert doc["model"] == PROVIDERS[provider][1]
    assert [(d["object"], d["index"]) for d in doc["data"]] == [("embedding", 0), ("embedding", 1)]
    for item, text in zip(doc["data"], TEXTS):
        assert close(item["embedding"], embedding_vector(text))
    tokens = sum(count_tokens(t) for t in TEXTS)
    assert doc["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_official_sdk_works_against_each_provider(openai_client, mock, provider):
    path, model = PROVIDERS[provider]
    client = openai_client(custom_host=mock.scenario() + path, provider=provider)
    result = client.embeddings.create(model=model, input=TEXTS)  # the SDK asks for base64 by default
    assert close(result.data[1].embedding, embedding_vector(TEXTS[1]))
    assert result.usage.total_tokens == sum(count_tokens(t) for t in TEXTS)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_base64_is_little_endian_float32(embed, provider):
    resp, _ = embed(provider, encoding_format="base64")
    raw = base64.b64decode(resp.json()["data"][0]["embedding"])
    values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    assert close(values, embedding_vector(TEXTS[0]))


def test_cohere_request_shape(embed):
    resp, requests = embed("cohere", dimensions=256)
    assert resp.status == 200, resp.text
    upstream = sent(requests)
    assert upstream == {"model": "embed-v4.0", "texts": TEXTS, "input_type": "search_document",
                        "embedding_types": ["float"], "output_dimension": 256}
    assert len(resp.json()["data"][0]["embedding"]) == 256


def test_cohere_input_type_is_passed_through(embed):
    resp, requests = embed("cohere", input_type="search_query")
    assert resp.status == 200
    assert sent(requests)["input_type"] == "search_query"


def test_voyage_request_shape(embed):
    resp, requests = embed("voyage", input_type="query", dimensions=512)
    assert resp.status == 200, resp.text
    assert sent(requests) == {"input": TEXTS, "model": "voyage-3.5", "input_type": "query", "output_dimension": 512}
    assert len(resp.json()["data"][0]["embedding"]) == 512


def test_jina_request_shape(embed):
    resp, requests = embed("jina", input_type="retrieval.query", dimensions=32)
    assert resp.status == 200, resp.text
    assert sent(requests) == {"model": "jina-embeddings-v3", "input": TEXTS, "embedding_type": "float",
                              "task": "retrieval.query", "dimensions": 32}
    assert len(resp.json()["data"][0]["embedding"]) == 32


def test_single_string_input(embed):
    resp, requests = embed("voyage", input="just one")
    assert resp.status == 200
    assert sent(requests)["input"] == ["just one"]
    assert len(resp.json()["data"]) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_token_input_is_a_400_naming_input(embed, provider):
    resp, requests = embed(provider, input=[1, 2, 3])
    assert resp.status == 400
    assert resp.json()["error"]["param"] == "input"
    assert requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_upstream_error_is_relayed(embed, provider):
    resp, _ = embed(provider, steps=[{"status": 503, "message": "overloaded"}])
    assert resp.status == 503
    assert resp.json()["error"]["message"] == "overloaded"
    assert resp.json()["provider"] == provider


def test_cohere_validation_error_is_relayed(embed):
    resp, _ = embed("cohere", input_type="poetry")
    assert resp.status == 400
    message = resp.json()["error"]["message"]
    assert message == "invalid request: valid input_type must be provided with the provided model"


def test_voyage_validation_error_is_relayed(embed):
    resp, _ = embed("voyage", dimensions=300)
    assert resp.status == 400
    assert "output_dimension" in resp.json()["error"]["message"]


def test_jina_validation_list_is_relayed(embed):
    resp, _ = embed("jina", input_type="poetry")
    assert resp.status == 422
    assert resp.json()["error"]["message"].startswith("task: task must be one of")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fields_a_provider_does_not_take_are_named_in_the_dropped_params_header(embed, provider):
    resp, requests = embed(provider, user="u-1", dimensions=256)
    assert resp.status == 200 and resp.headers["x-gateway-dropped-params"] == "user"
    assert "user" not in sent(requests)
    plain, _ = embed(provider, encoding_format="float")
    assert plain.status == 200 and "x-gateway-dropped-params" not in plain.headers
