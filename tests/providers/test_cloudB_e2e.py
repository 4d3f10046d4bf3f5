"""cloudB through the real gateway (config in x-gateway-config, custom_host = scenario base + "/openai"): the
official SDK non-streamed and streamed, tools both ways, relayed errors, embeddings, AI endpoints."""

from __future__ import annotations

import msgspec
import openai
import pytest
from openai import OpenAI

from gateway_mock.kit import DEFAULT_REPLY
from gateway_mock.vendorA import embedding_vector
from tests.support.http import post, stream_events
from tests.support.servers import ADMIN_KEY

API_VERSION = "2024-10-21"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}}}}]


def config(base: str, **extra) -> dict:
    return {"provider": "cloudB", "api_key": "az-key-1", "custom_host": base + "/openai",
            "deployment_id": "gpt4o-prod", "api_version": API_VERSION, **extra}


def headers(cfg: dict) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(cfg).decode(),
            "content-type": "application/json"}


def client(gateway, cfg: dict) -> OpenAI:
    hdrs = headers(cfg)
    del hdrs["content-type"]
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="unused-by-config", default_headers=hdrs, max_retries=0,
                  timeout=60, http_client=gateway.http_client())


def test_sdk_chat_goes_to_the_deployment_with_api_key_and_api_version(gateway, mock):
    base = mock.scenario()
    result = client(gateway, config(base)).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert result.choices[0].message.content == DEFAULT_REPLY
    assert result.usage.total_tokens > 0
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == "/openai/deployments/gpt4o-prod/chat/completions"
    assert sent["query"] == f"api-version={API_VERSION}"
    assert sent["headers"]["api-key"] == "az-key-1"
    assert "authorization" not in sent["headers"]


def test_sdk_stream_with_usage(gateway, mock):
    base = mock.scenario([{"reply": "one two three"}])
    stream = client(gateway, config(base)).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert any(c.choices and c.choices[0].finish_reason == "stop" for c in chunks)


def test_stream_that_fails_first_is_a_real_error_status(gateway, mock):
    base = mock.scenario([{"stream_error": "first", "message": "overloaded right now"}])
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    resp = post(f"{gateway.url}/v1/chat/completions", body, headers(config(base)))
    assert resp.status >= 500
    assert resp.json()["error"]["message"] == "overloaded right now"


def test_tools_both_ways(gateway, mock):
    base = mock.scenario([{"tool_call": True}, {}])
    sdk = client(gateway, config(base))
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    first = sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and msgspec.json.decode(call.function.arguments) == {
        "location": "Paris"}
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 21}'}]
    second = sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    assert second.choices[0].message.content == DEFAULT_REPLY
    sent = msgspec.json.decode(mock.calls(base)["requests"][1]["body"])
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 21}'}


def test_upstream_error_is_relayed_with_status_and_message(gateway, mock):
    base = mock.scenario([{"status": 429, "message": "Requests to the deployment exceeded the rate limit.",
                           "retry_after": "7"}])
    with pytest.raises(openai.RateLimitError) as info:
        client(gateway, config(base)).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 429
    assert "exceeded the rate limit" in str(info.value)
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body["message"] == "Requests to the deployment exceeded the rate limit."


def test_missing_key_gets_the_services_401(gateway, mock):
    base = mock.scenario()
    cfg = config(base)
    del cfg["api_key"]
    resp = post(f"{gateway.url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]},
                headers(cfg))
    assert resp.status == 401
    assert resp.json()["provider"] == "cloudB"
    assert "Access denied" in resp.json()["error"]["message"]


def test_missing_deployment_is_a_400_naming_the_field(gateway, mock):
    cfg = config(mock.scenario())
    del cfg["deployment_id"]
    resp = post(f"{gateway.url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]},
                headers(cfg))
    assert resp.status == 400 and resp.json()["error"]["param"] == "deployment_id"


def test_deployments_alias_routes_by_model(gateway, mock):
    base = mock.scenario()
    cfg = {"provider": "cloudB", "api_key": "k", "custom_host": base + "/openai", "deployments": [
        {"deployment_id": "mini-dep", "alias": "gpt-4o-mini", "api_version": "2024-06-01"},
        {"deployment_id": "big-dep", "alias": "gpt-4o", "api_version": API_VERSION, "is_default": True}]}
    client(gateway, cfg).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == "/openai/deployments/mini-dep/chat/completions"
    assert sent["query"] == "api-version=2024-06-01"


def test_headers_instead_of_config(gateway, mock):
    base = mock.scenario()
    hdrs = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "cloudB", "authorization": "Bearer az-hdr",
            "x-gateway-custom-host": base + "/openai", "x-gateway-cloudB-deployment-id": "hdr-dep",
            "x-gateway-cloudB-api-version": API_VERSION, "content-type": "application/json"}
    resp = post(f"{gateway.url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]},
                hdrs)
    assert resp.status == 200, resp.text
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == "/openai/deployments/hdr-dep/chat/completions"
    assert sent["headers"]["api-key"] == "az-hdr"


def test_sdk_embeddings(gateway, mock):
    base = mock.scenario()
    result = client(gateway, config(base, deployment_id="embed-dep")).embeddings.create(
        model="text-embedding-3-small", input=["alpha", "beta"])
    assert [d.index for d in result.data] == [0, 1]
    assert result.data[1].embedding == pytest.approx(embedding_vector("beta"))
    assert mock.calls(base)["requests"][0]["path"] == "/openai/deployments/embed-dep/embeddings"


def test_managed_endpoint_through_custom_host(gateway, mock):
    base = mock.scenario()
    cfg = {"provider": "cloudB", "api_key": "ml-key", "custom_host": base, "cloudB_endpoint_name": "my-ep",
           "cloudB_deployment_type": "managed", "cloudB_deployment_name": "green"}
    result = client(gateway, cfg).chat.completions.create(model="phi-3", messages=[{"role": "user", "content": "x"}])
    assert result.choices[0].message.content == DEFAULT_REPLY
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer ml-key"
    assert sent["headers"]["azureml-model-deployment"] == "green"


def test_streamed_filter_chunks_have_the_unified_chunk_shape(gateway, mock):
    """The leading prompt_filter_results chunk and the async filter's annotation chunk carry the stream's identity."""
    base = mock.scenario([{"filter_annotations": True}])
    chunks = list(client(gateway, config(base)).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl")
    assert {c.object for c in chunks} == {"chat.completion.chunk"} and all(c.created > 0 for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == DEFAULT_REPLY
    first, last = chunks[0].model_dump(), chunks[-1].model_dump()
    assert first["choices"] == [] and first["prompt_filter_results"][0]["content_filter_results"]
    assert last["choices"][0]["content_filter_offsets"]["end_offset"] == 120
    # on the wire: every chunk has an id, the annotation chunk an empty delta
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", body,
                                      headers(config(mock.scenario([{"filter_annotations": True}]))))
    raw = [msgspec.json.decode(e) for e in events if e != b"[DONE]"]
    assert status == 200 and all(doc["id"] and doc["object"] == "chat.completion.chunk" for doc in raw)
    assert raw[-1]["choices"][0]["delta"] == {} and "content_filter_offsets" in raw[-1]["choices"][0]
