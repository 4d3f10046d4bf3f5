"""POST /v1/moderations through the real gateway to the vendorA mock: the spec's moderation answer."""

from __future__ import annotations

import msgspec
import pytest

from tests.support.http import post

CATEGORIES = ("hate", "hate/threatening", "harassment", "harassment/threatening", "self-harm", "self-harm/intent",
              "self-harm/instructions", "sexual", "sexual/minors", "violence", "violence/graphic")


@pytest.fixture
def moderate(gateway, mock, gw_headers):
    def call(body: dict, provider: str = "vendorA"):
        base = mock.scenario()
        resp = post(f"{gateway.url}/v1/moderations", body, gw_headers(base + "/v1", provider=provider))
        return resp, mock.calls(base)["requests"]

    return call


def check_result(result: dict) -> None:
    assert isinstance(result["flagged"], bool)
    for key in CATEGORIES:
        assert isinstance(result["categories"][key], bool), key
        assert isinstance(result["category_scores"][key], float), key


def test_sdk_moderation_flags_violence(openai_client):
    client = openai_client()
    result = client.moderations.create(model="text-moderation-latest", input="I will kill you")
    assert result.id.startswith("modr-")
    assert result.model.startswith("text-moderation")
    first = result.results[0]
    assert first.flagged is True
    assert first.categories.violence is True
    assert first.categories.hate is False
    assert first.category_scores.violence > first.category_scores.hate


def test_sdk_answer_has_all_eleven_categories(openai_client):
    client = openai_client()
    result = client.moderations.create(model="text-moderation-stable", input="a calm sentence")
    doc = msgspec.json.decode(result.model_dump_json(by_alias=True))
    assert list(doc)[:3] == ["id", "model", "results"]
    check_result(doc["results"][0])
    assert doc["results"][0]["flagged"] is False


@pytest.mark.parametrize("model", ["text-moderation-latest", "text-moderation-stable", "omni-moderation-latest", None])
def test_answer_shape_for_each_model(moderate, model):
    body = {"input": "hello there"} if model is None else {"input": "hello there", "model": model}
    resp, requests = moderate(body)
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert isinstance(doc["id"], str) and isinstance(doc["model"], str)
    assert len(doc["results"]) == 1
    check_result(doc["results"][0])
    assert msgspec.json.decode(requests[0]["body"]) == body  # forwarded as sent


def test_list_input_gets_one_result_each(moderate):
    resp, _ = moderate({"input": ["you idiot", "have a nice day"], "model": "text-moderation-latest"})
    results = resp.json()["results"]
    assert [r["flagged"] for r in results] == [True, False]
    assert results[0]["categories"]["harassment"] is True
    for result in results:
        check_result(result)


def test_omni_multimodal_parts(moderate):
    parts = [{"type": "text", "text": "an attack"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
    resp, _ = moderate({"input": parts, "model": "omni-moderation-latest"})
    assert resp.status == 200, resp.text
    result = resp.json()["results"][0]
    check_result(result)
    assert result["categories"]["violence"] is True
    assert result["category_applied_input_types"]["violence"] == ["text", "image"]


@pytest.mark.parametrize("body,param", [
    ({"input": "hi", "model": "gpt-4o"}, "model"),
    ({"model": "text-moderation-latest"}, "input"),
    ({"input": [{"type": "text", "text": "hi"}], "model": "text-moderation-latest"}, "input"),
])
def test_invalid_bodies_are_400s_that_never_reach_upstream(moderate, body, param):
    resp, requests = moderate(body)
    assert resp.status == 400
    assert resp.json()["error"]["param"] == param
    assert requests == []


def test_provider_without_moderations_is_a_400(moderate):
    resp, requests = moderate({"input": "hi"}, provider="cohere")
    assert resp.status == 400
    assert resp.json()["error"]["param"] == "provider"
    assert requests == []
