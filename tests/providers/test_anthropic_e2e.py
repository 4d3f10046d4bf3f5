"""anthropic through the real gateway against the faithful mock: the official SDK, raw HTTP, streams, tools, errors."""

from __future__ import annotations

import msgspec
import openai
import pytest

from tests.support.http import post, stream_events
from tests.support.servers import ADMIN_KEY

MODEL = "claude-test-1"
HI = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
WEATHER_SCHEMA = {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": WEATHER_SCHEMA}}]
THINKING = {"type": "enabled", "budget_tokens": 1024}


def chat_url(gateway) -> str:
    return f"{gateway.url}/v1/chat/completions"


def upstream_body(mock, base: str, n: int = 0) -> dict:
    return msgspec.json.decode(mock.calls(base)["requests"][n]["body"])


def config_headers(base: str, **config) -> dict[str, str]:
    doc = {"provider": "anthropic", "api_key": "sk-ant-config", "custom_host": base + "/v1", **config}
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(doc).decode(),
            "content-type": "application/json"}


def test_non_streamed_text_and_what_the_upstream_received(openai_client, mock):
    base = mock.scenario([{"reply": "Bonjour from the mock."}])
    done = openai_client(base + "/v1", provider="anthropic").chat.completions.create(model=MODEL, messages=HI)
    assert done.object == "chat.completion" and done.id.startswith("msg_")
    assert done.choices[0].message.content == "Bonjour from the mock."
    assert done.choices[0].finish_reason == "stop"
    assert done.usage.prompt_tokens > 0 and done.usage.total_tokens == done.usage.prompt_tokens + \
        done.usage.completion_tokens
    sent = mock.calls(base)["requests"][0]
    assert sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == "sk-provider-token"
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent["headers"]
    body = msgspec.json.decode(sent["body"])
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == 4096 and body["model"] == MODEL


def test_streamed_text_with_sdk(openai_client, mock):
    reply = "One two three four five, streamed word by word."
    base = mock.scenario([{"reply": reply}])
    stream = openai_client(base + "/v1", provider="anthropic").chat.completions.create(
        model=MODEL, messages=HI, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 9
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("msg_")
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert upstream_body(mock, base)["stream"] is True


def test_raw_stream_ends_with_one_done(gateway, mock, gw_headers):
    base = mock.scenario()
    status, headers, events = stream_events(chat_url(gateway), {"model": MODEL, "messages": HI, "stream": True},
                                            gw_headers(base + "/v1", provider="anthropic"))
    payloads = list(events)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert payloads[-1] == b"[DONE]" and payloads.count(b"[DONE]") == 1
    chunks = [msgspec.json.decode(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert headers["x-gateway-provider"] == "anthropic"


def test_tools_non_streamed(openai_client, mock):
    base = mock.scenario([{"tool_call": True}])
    done = openai_client(base + "/v1", provider="anthropic").chat.completions.create(
        model=MODEL, messages=HI, tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.id.startswith("toolu_") and call.function.name == "get_weather"
    assert msgspec.json.decode(call.function.arguments) == {"location": "Paris"}
    sent = upstream_body(mock, base)
    assert sent["tools"][0]["name"] == "get_weather" and "input_schema" in sent["tools"][0]
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


def test_tools_streamed_and_the_result_sent_back(openai_client, mock):
    base = mock.scenario([{"tool_call": True}, {"reply": "It is sunny in Paris."}])
    client = openai_client(base + "/v1", provider="anthropic")
    chunks = list(client.chat.completions.create(model=MODEL, messages=HI, tools=TOOLS, stream=True))
    calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].index == 0 and calls[0].id.startswith("toolu_") and calls[0].function.name == "get_weather"
    arguments = "".join(t.function.arguments or "" for t in calls)
    assert msgspec.json.decode(arguments) == {"location": "Paris"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    follow_up = [*HI,
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": calls[0].id, "type": "function",
                      "function": {"name": "get_weather", "arguments": arguments}}]},
                 {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny, 24C"}]
    done = client.chat.completions.create(model=MODEL, messages=follow_up, tools=TOOLS)
    assert done.choices[0].message.content == "It is sunny in Paris."
    sent = upstream_body(mock, base, 1)["messages"]
    assert sent[1]["content"] == [{"type": "tool_use", "id": calls[0].id, "name": "get_weather",
                                   "input": {"location": "Paris"}}]
    assert sent[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0].id, "content": "sunny, 24C"}]}


def test_upstream_429_is_relayed_with_status_message_and_provider(gateway, mock, gw_headers):
    base = mock.scenario([{"status": 429, "message": "Number of request tokens has exceeded your rate limit",
                           "retry_after": "7"}])
    resp = post(chat_url(gateway), {"model": MODEL, "messages": HI}, gw_headers(base + "/v1", provider="anthropic"))
    assert resp.status == 429
    doc = resp.json()
    assert doc["error"]["message"] == "Number of request tokens has exceeded your rate limit"
    assert doc["error"]["type"] == "rate_limit_error"
    assert doc["provider"] == "anthropic"
    assert resp.headers["retry-after"] == "7"


def test_overloaded_529_reaches_the_sdk_as_a_server_error(openai_client, mock):
    base = mock.scenario([{"status": 529}])
    with pytest.raises(openai.InternalServerError) as info:
        openai_client(base + "/v1", provider="anthropic").chat.completions.create(model=MODEL, messages=HI)
    assert info.value.status_code == 529


def test_first_event_stream_error_is_a_real_status(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "first", "error_type": "overloaded_error", "message": "Overloaded"}])
    resp = post(chat_url(gateway), {"model": MODEL, "messages": HI, "stream": True},
                gw_headers(base + "/v1", provider="anthropic"))
    assert resp.status == 529
    assert resp.json()["error"]["message"] == "Overloaded" and resp.json()["provider"] == "anthropic"


def test_midway_stream_error_ends_with_an_error_event_and_done(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "middle", "error_type": "api_error", "message": "Internal hiccup"}])
    status, _, events = stream_events(chat_url(gateway), {"model": MODEL, "messages": HI, "stream": True},
                                      gw_headers(base + "/v1", provider="anthropic"))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    error = msgspec.json.decode(payloads[-2])
    assert error["error"]["message"] == "Internal hiccup"


def test_html_answer_is_502_naming_anthropic(gateway, mock, gw_headers):
    base = mock.scenario([{"html": True}])
    for stream in (False, True):
        resp = post(chat_url(gateway), {"model": MODEL, "messages": HI, "stream": stream},
                    gw_headers(base + "/v1", provider="anthropic"))
        assert resp.status == 502
        assert "anthropic" in resp.json()["error"]["message"] and resp.json()["provider"] == "anthropic"


def test_thinking_dropped_by_default(openai_client, mock):
    base = mock.scenario()
    done = openai_client(base + "/v1", provider="anthropic").chat.completions.create(
        model=MODEL, messages=HI, max_tokens=2048, extra_body={"thinking": THINKING})
    assert done.choices[0].message.content.startswith("Hello from the gateway mock upstream")
    assert getattr(done.choices[0].message, "content_blocks", None) is None
    assert upstream_body(mock, base)["thinking"] == THINKING


def test_thinking_returned_with_strict_compliance_false(gateway, mock):
    base = mock.scenario()
    body = {"model": MODEL, "messages": HI, "max_tokens": 2048, "thinking": THINKING}
    resp = post(chat_url(gateway), body, config_headers(base, strict_vendorA_compliance=False))
    assert resp.status == 200, resp.text
    message = resp.json()["choices"][0]["message"]
    blocks = message["content_blocks"]
    assert blocks[0]["type"] == "thinking" and blocks[0]["thinking"] and blocks[0]["signature"]
    assert blocks[1] == {"type": "text", "text": message["content"]}
    assert mock.calls(base)["requests"][0]["headers"]["x-api-key"] == "sk-ant-config"


def test_streamed_thinking_with_strict_compliance_false(gateway, mock):
    base = mock.scenario()
    body = {"model": MODEL, "messages": HI, "max_tokens": 2048, "thinking": THINKING, "stream": True}
    status, _, events = stream_events(chat_url(gateway), body, config_headers(base, strict_vendorA_compliance=False))
    chunks = [msgspec.json.decode(p) for p in events if p != b"[DONE]"]
    assert status == 200
    blocks = [b for c in chunks for b in c["choices"][0]["delta"].get("content_blocks", [])]
    thinking = "".join(b["delta"].get("thinking", "") for b in blocks if b["index"] == 0)
    assert thinking and any("signature" in b["delta"] for b in blocks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text.startswith("Hello from the gateway mock upstream")


def test_mock_refuses_what_the_real_api_refuses(mock):
    url = mock.scenario() + "/v1/messages"
    good = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    assert post(url, body, good).status == 200
    missing_key = post(url, body, {k: v for k, v in good.items() if k != "x-api-key"})
    assert missing_key.status == 401 and missing_key.json()["error"]["type"] == "authentication_error"
    assert post(url, body, {k: v for k, v in good.items() if k != "anthropic-version"}).status == 400
    no_max = post(url, {k: v for k, v in body.items() if k != "max_tokens"}, good)
    assert no_max.status == 400 and "max_tokens" in no_max.json()["error"]["message"]
    twice = {**body, "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    refused = post(url, twice, good)
    assert refused.status == 400 and "alternate" in refused.json()["error"]["message"]


def test_completions_through_anthropic(openai_client, mock):
    base = mock.scenario([{"reply": "Short answer."}])
    client = openai_client(base + "/v1", provider="anthropic")
    done = client.completions.create(model=MODEL, prompt="Say something")
    assert done.object == "text_completion" and done.choices[0].text == "Short answer."
    pieces = [c.choices[0].text for c in client.completions.create(model=MODEL, prompt="x", stream=True) if c.choices]
    assert "".join(pieces) == "Short answer."
    assert upstream_body(mock, base)["messages"] == [{"role": "user", "content": "Say something"}]


def test_n_greater_than_one_is_400_naming_n(gateway, mock, gw_headers):
    resp = post(chat_url(gateway), {"model": MODEL, "messages": HI, "n": 2},
                gw_headers(mock.scenario() + "/v1", provider="anthropic"))
    assert resp.status == 400 and resp.json()["error"]["param"] == "n"


def test_cut_stream_ends_with_an_error_event_and_done(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "cut"}])
    status, _, events = stream_events(chat_url(gateway), {"model": MODEL, "messages": HI, "stream": True},
                                      gw_headers(base + "/v1", provider="anthropic"))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    assert "error" in msgspec.json.decode(payloads[-2])


def test_cached_prompt_tokens_are_reported(gateway, mock, gw_headers):
    base = mock.scenario()
    system = [{"type": "text", "text": "A long shared context. " * 40, "cache_control": {"type": "ephemeral"}}]
    resp = post(chat_url(gateway), {"model": MODEL, "messages": [{"role": "system", "content": system},
                                                                 {"role": "user", "content": "hi"}]},
                gw_headers(base + "/v1", provider="anthropic"))
    usage = resp.json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] > 200
    assert usage["prompt_tokens"] > usage["prompt_tokens_details"]["cached_tokens"]
    assert upstream_body(mock, base)["system"] == system
