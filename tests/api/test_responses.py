"""``/v1/responses/{id}`` and ``/input_items`` forwarded to the provider with the vendorA SDK: the spec's stored
response and input-item list shapes, paging and order; bad query values refused before anything is sent."""

from __future__ import annotations

import pytest
from openai import NotFoundError

from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY

RESPONSE_FIELDS = {"id", "object", "created_at", "metadata", "temperature", "top_p", "model", "instructions",
                   "tools", "tool_choice", "error", "incomplete_details", "output", "parallel_tool_calls", "user",
                   "previous_response_id", "reasoning", "max_output_tokens", "text", "truncation", "status", "usage"}


def stored_response(mock_url: str, base: str) -> str:
    """A response stored at the provider (made directly at the mock: the gateway only reads them)."""
    items = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    resp = post(f"{base}/v1/responses", {"model": "gpt-4o", "input": items, "instructions": "be brief",
                                         "metadata": {"ticket": "42"}}, {"authorization": "Bearer sk"})
    assert resp.status == 200, resp.text
    return resp.json()["id"]


def test_a_stored_response_is_retrieved_in_the_spec_shape(openai_client, mock):
    base = mock.scenario()
    response_id = stored_response(mock.url, base)
    client = openai_client(base + "/v1")
    response = client.responses.retrieve(response_id, include=["message.input_image.image_url",
                                                                "file_search_call.results"])
    raw = response.model_dump()
    assert RESPONSE_FIELDS <= set(raw)
    assert (raw["object"], raw["status"], raw["truncation"], raw["instructions"]) == (
        "response", "completed", "disabled", "be brief")
    assert raw["metadata"] == {"ticket": "42"} and raw["parallel_tool_calls"] is True
    assert response.output_text and raw["usage"]["total_tokens"] == (
        raw["usage"]["input_tokens"] + raw["usage"]["output_tokens"])
    assert "output_tokens_details" in raw["usage"] and "input_tokens_details" in raw["usage"]
    sent = mock.calls(base)["requests"][-1]
    assert sent["path"] == f"/v1/responses/{response_id}" and "include" in sent["query"]


def test_input_items_page_in_either_order(openai_client, mock):
    base = mock.scenario()
    response_id = stored_response(mock.url, base)
    client = openai_client(base + "/v1")
    first = client.responses.input_items.list(response_id, limit=2, order="asc")
    texts = [item.content[0].text for item in first.data]
    assert texts == ["message 0", "message 1"] and first.has_more
    assert (first.first_id, first.last_id) == (first.data[0].id, first.data[1].id)
    rest = client.responses.input_items.list(response_id, limit=10, order="asc", after=first.last_id)
    assert [item.content[0].text for item in rest.data] == ["message 2", "message 3", "message 4"]
    assert not rest.has_more
    newest = client.responses.input_items.list(response_id, order="desc", limit=1)
    assert newest.data[0].content[0].text == "message 4"
    every = [item.id for item in client.responses.input_items.list(response_id, limit=2, order="asc")]
    assert len(every) == 5  # the SDK followed the pages


def test_input_items_come_oldest_first_when_no_order_is_asked(openai_client, mock):
    # the spec's default order is asc, whatever the provider's own default is
    base = mock.scenario()
    response_id = stored_response(mock.url, base)
    page = openai_client(base + "/v1").responses.input_items.list(response_id, limit=2)
    assert [item.content[0].text for item in page.data] == ["message 0", "message 1"]
    assert mock.calls(base)["requests"][-1]["query"].endswith("order=asc")


@pytest.mark.parametrize("path, param", [
    ("/v1/responses/resp_x?include=everything", "include"),
    ("/v1/responses/resp_x?include[]=file_search_call.results&include[]=nope", "include"),
    ("/v1/responses/resp_x/input_items?limit=0", "limit"),
    ("/v1/responses/resp_x/input_items?limit=101", "limit"),
    ("/v1/responses/resp_x/input_items?order=sideways", "order"),
    ("/v1/responses/resp_x?stream=true", "stream"),
])
def test_bad_query_values_are_400s_naming_them_before_any_upstream_call(gateway, gw_headers, mock, path, param):
    base = mock.scenario()
    resp = request("GET", gateway.url + path, headers=gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param
    assert mock.calls(base)["calls"] == 0


def test_unknown_responses_are_404s_and_a_provider_is_needed(openai_client, mock, gateway):
    client = openai_client(mock.scenario() + "/v1")
    with pytest.raises(NotFoundError):
        client.responses.retrieve("resp_unknown")
    with pytest.raises(NotFoundError):
        client.responses.input_items.list("resp_unknown")
    resp = request("GET", f"{gateway.url}/v1/responses/resp_x", headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 400 and resp.json()["error"]["param"] == "x-gateway-provider"
    # anthropic keeps no responses: only the ones the gateway translated and stored exist, so an unknown id is a 404
    with pytest.raises(NotFoundError) as caught:
        openai_client(mock.url + "/v1", provider="anthropic").responses.retrieve("resp_x")
    assert "anthropic" in caught.value.message
