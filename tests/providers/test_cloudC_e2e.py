"""cloudC through the real gateway (config in x-gateway-config, custom_host = scenario base + "/v1"): the official
SDK non-streamed and streamed, tools both ways, thoughts, relayed errors, embeddings, and the service-account flow
(one token exchange for 20 concurrent requests)."""

from __future__ import annotations

import concurrent.futures

import msgspec
import openai
import pytest
from openai import OpenAI

from gateway_mock.cloudC import TEST_TOKEN
from gateway_mock.kit import DEFAULT_REPLY, count_tokens
from gateway_mock.vendorA import embedding_vector
from tests.providers.test_cloudC_auth import _OTHER_KEY, service_account
from tests.support.http import post, stream_events
from tests.support.servers import ADMIN_KEY

MODEL = "gemini-2.0-flash"
MODEL_PATH = "/v1/projects/proj-1/locations/us-central1/publishers/google/models/"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                           "parameters": {"type": "object",
                                                          "properties": {"location": {"type": "string"}},
                                                          "required": ["location"]}}}]
HI = [{"role": "user", "content": "hi"}]


def config(base: str, **extra) -> dict:
    return {"provider": "cloudC", "api_key": TEST_TOKEN, "custom_host": base + "/v1", "cloudC_project_id": "proj-1",
            "cloudC_region": "us-central1", **extra}


def headers(cfg: dict, **extra: str) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(cfg).decode(),
            "content-type": "application/json", **extra}


def client(gateway, cfg: dict) -> OpenAI:
    hdrs = headers(cfg)
    del hdrs["content-type"]
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="unused-by-config", default_headers=hdrs, max_retries=0,
                  timeout=60, http_client=gateway.http_client())


def chat_url(gateway) -> str:
    return f"{gateway.url}/v1/chat/completions"


def test_sdk_chat_maps_both_ways(gateway, mock):
    base = mock.scenario()
    result = client(gateway, config(base)).chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": "Be kind."}, *HI], temperature=0.5, max_tokens=99)
    assert result.object == "chat.completion"
    assert result.choices[0].message.content == DEFAULT_REPLY
    assert result.choices[0].finish_reason == "stop"
    assert result.model == MODEL
    assert result.usage.completion_tokens == count_tokens(DEFAULT_REPLY)
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == MODEL_PATH + MODEL + ":generateContent"
    assert sent["headers"]["authorization"] == f"Bearer {TEST_TOKEN}"
    body = msgspec.json.decode(sent["body"])
    assert body["systemInstruction"] == {"parts": [{"text": "Be kind."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["generationConfig"] == {"temperature": 0.5, "maxOutputTokens": 99}


def test_sdk_stream_with_usage(gateway, mock):
    base = mock.scenario()
    stream = client(gateway, config(base)).chat.completions.create(
        model=MODEL, messages=HI, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == DEFAULT_REPLY
    assert len({c.id for c in chunks}) == 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == count_tokens(DEFAULT_REPLY)
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == MODEL_PATH + MODEL + ":streamGenerateContent" and sent["query"] == "alt=sse"


def test_raw_stream_events_arrive_one_by_one_and_end_with_done(gateway, mock):
    base = mock.scenario([{"chunks": 5}])
    status, _, events = stream_events(chat_url(gateway), {"model": MODEL, "messages": HI, "stream": True},
                                      headers(config(base)))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    chunks = [msgspec.json.decode(p) for p in payloads[:-1]]
    assert [c["choices"][0]["delta"].get("content") for c in chunks][:5] == DEFAULT_REPLY.split(" ")[:1] + [
        " " + w for w in DEFAULT_REPLY.split(" ")[1:5]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"


def test_tools_both_ways(gateway, mock):
    base = mock.scenario([{"tool_call": True}, {}])
    sdk = client(gateway, config(base))
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    first = sdk.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="required")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and msgspec.json.decode(call.function.arguments) == {
        "location": "Paris"}
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 21}'}]
    second = sdk.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    assert second.choices[0].message.content == DEFAULT_REPLY
    first_sent, second_sent = (msgspec.json.decode(r["body"]) for r in mock.calls(base)["requests"])
    assert first_sent["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert first_sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert second_sent["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}}]}
    assert second_sent["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"temp_c": 21}}}]}


def test_streamed_tool_call(gateway, mock):
    base = mock.scenario([{"tool_call": True}])
    chunks = list(client(gateway, config(base)).chat.completions.create(
        model=MODEL, messages=HI, tools=TOOLS, stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(tc.index, tc.function.name) for tc in calls] == [(0, "get_weather")]
    assert msgspec.json.decode(calls[0].function.arguments) == {"location": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_thoughts_only_with_strict_compliance_off(gateway, mock):
    body = {"model": MODEL, "messages": HI, "thinking": {"type": "enabled", "budget_tokens": 512}}
    base = mock.scenario()
    loose = post(chat_url(gateway), body, headers(config(base, strict_vendorA_compliance=False))).json()
    message = loose["choices"][0]["message"]
    assert message["content"] == DEFAULT_REPLY
    assert message["content_blocks"][0]["type"] == "thinking" and message["content_blocks"][0]["thinking"]
    assert loose["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    sent = msgspec.json.decode(mock.calls(base)["requests"][0]["body"])
    assert sent["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 512}
    strict = post(chat_url(gateway), body, headers(config(mock.scenario()))).json()["choices"][0]["message"]
    assert "content_blocks" not in strict and strict["content"] == DEFAULT_REPLY


def test_safety_stop_is_content_filter(gateway, mock):
    base = mock.scenario([{"error_type": "SAFETY"}])
    result = client(gateway, config(base)).chat.completions.create(model=MODEL, messages=HI)
    assert result.choices[0].finish_reason == "content_filter"


def test_upstream_error_is_relayed_with_status_message_and_code(gateway, mock):
    base = mock.scenario([{"status": 404, "message": "Publisher Model `gemini-9` was not found."}])
    resp = post(chat_url(gateway), {"model": "gemini-9", "messages": HI}, headers(config(base)))
    assert resp.status == 404
    doc = resp.json()
    assert doc["error"]["message"] == "Publisher Model `gemini-9` was not found."
    assert doc["error"]["code"] == "NOT_FOUND" and doc["provider"] == "cloudC"


def test_bad_token_gets_the_services_401(gateway, mock):
    with pytest.raises(openai.AuthenticationError) as info:
        client(gateway, config(mock.scenario(), api_key="ya29.wrong")).chat.completions.create(
            model=MODEL, messages=HI)
    assert "invalid authentication credentials" in str(info.value)


def test_in_band_stream_errors(gateway, mock):
    body = {"model": MODEL, "messages": HI, "stream": True}
    first = post(chat_url(gateway), body, headers(config(mock.scenario([{"stream_error": "first",
                                                                         "message": "backend hiccup"}]))))
    assert first.status == 500 and first.json()["error"]["message"] == "backend hiccup"
    midway = mock.scenario([{"stream_error": "middle", "chunk_delay_ms": 20}])
    status, _, events = stream_events(chat_url(gateway), body, headers(config(midway)))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    assert msgspec.json.decode(payloads[-2])["error"]["message"] == "mock error midway"


def test_llm_request_type_header_is_sent_upstream(gateway, mock):
    base = mock.scenario()
    assert post(chat_url(gateway), {"model": MODEL, "messages": HI},
                headers(config(base), **{"X-cloudC-LLM-Request-Type": "dedicated"})).status == 200
    assert mock.calls(base)["requests"][0]["headers"]["x-vertex-ai-llm-request-type"] == "dedicated"


def test_headers_instead_of_config(gateway, mock):
    base = mock.scenario()
    hdrs = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "cloudC", "authorization": f"Bearer {TEST_TOKEN}",
            "x-gateway-custom-host": base + "/v1", "x-gateway-cloudC-project-id": "proj-1",
            "x-gateway-cloudC-region": "us-central1", "content-type": "application/json"}
    resp = post(chat_url(gateway), {"model": MODEL, "messages": HI}, hdrs)
    assert resp.status == 200, resp.text
    assert mock.calls(base)["requests"][0]["path"] == MODEL_PATH + MODEL + ":generateContent"


def test_sdk_embeddings(gateway, mock):
    base = mock.scenario()
    texts = ["The quick brown fox", "jumps over the lazy dog"]
    result = client(gateway, config(base)).embeddings.create(model="text-embedding-005", input=texts,
                                                             encoding_format="float")
    assert [d.index for d in result.data] == [0, 1]
    assert result.data[0].embedding == pytest.approx(embedding_vector(texts[0]))
    assert result.usage.prompt_tokens == sum(count_tokens(t) for t in texts)
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == MODEL_PATH + "text-embedding-005:predict"
    assert msgspec.json.decode(sent["body"]) == {"instances": [{"content": texts[0]}, {"content": texts[1]}]}


def test_service_account_one_exchange_for_twenty_concurrent_requests(gateway, mock):
    base = mock.scenario()
    account = service_account(mock, base + "/token")
    cfg = config(base, cloudC_service_account_json=account)
    del cfg["api_key"]
    del cfg["cloudC_project_id"]  # the account's project_id is used
    hdrs = headers(cfg)
    body = {"model": MODEL, "messages": HI}
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(lambda _: post(chat_url(gateway), body, hdrs), range(20)))
    assert [r.status for r in responses] == [200] * 20, responses[0].text
    assert all(r.json()["choices"][0]["message"]["content"] == DEFAULT_REPLY for r in responses)
    requests = mock.calls(base)["requests"]
    token_requests = [r for r in requests if r["path"] == "/token"]
    model_requests = [r for r in requests if r["path"] != "/token"]
    assert len(token_requests) == 1 and len(model_requests) == 20
    assert token_requests[0]["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert len({r["headers"]["authorization"] for r in model_requests}) == 1
    assert model_requests[0]["path"] == "/v1/projects/test-project/locations/us-central1/publishers/google/models/" \
                                        + MODEL + ":generateContent"
    # a later request reuses the cached token
    assert post(chat_url(gateway), body, hdrs).status == 200
    assert sum(1 for r in mock.calls(base)["requests"] if r["path"] == "/token") == 1


def test_refused_service_account_is_a_401_naming_cloudC_and_the_token_uri(gateway, mock):
    base = mock.scenario()
    account = service_account(mock, base + "/token", register_key=_OTHER_KEY)
    cfg = config(base, cloudC_service_account_json=account)
    del cfg["api_key"]
    resp = post(chat_url(gateway), {"model": MODEL, "messages": HI}, headers(cfg))
    assert resp.status == 401
    message = resp.json()["error"]["message"]
    assert "cloudC" in message and base + "/token" in message
    assert not [r for r in mock.calls(base)["requests"] if r["path"] != "/token"]
