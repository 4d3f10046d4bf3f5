"""Chat completions through the real gateway: SDK round trips, streaming, validation, headers and errors."""

from __future__ import annotations

import concurrent.futures

import msgspec
import openai
import pytest

from tests.support.http import post, request, stream_events
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def chat_url(gateway) -> str:
    return f"{gateway.url}/v1/chat/completions"


def test_stream_with_sdk_reassembles_reply_and_ends(openai_client):
    client = openai_client()
    stream = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("Hello from the gateway mock upstream")
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert any(c.choices and c.choices[0].finish_reason == "stop" for c in chunks)


def test_raw_stream_is_sse_with_done_and_no_buffering_headers(gateway, mock, gw_headers):
    status, headers, events = stream_events(chat_url(gateway), {**CHAT, "stream": True}, gw_headers(mock.url + "/v1"))
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["cache-control"] == "no-cache"
    assert headers["x-accel-buffering"] == "no"
    payloads = list(events)
    assert payloads[-1] == b"[DONE]"
    assert payloads.count(b"[DONE]") == 1
    chunks = [msgspec.json.decode(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1


def test_completions_non_streamed_and_streamed(openai_client):
    client = openai_client()
    done = client.completions.create(model="gpt-instruct", prompt="Say hi")
    assert done.object == "text_completion" and done.choices[0].text
    pieces = [c.choices[0].text for c in client.completions.create(model="m", prompt="x", stream=True) if c.choices]
    assert "".join(pieces) == done.choices[0].text


def test_original_bytes_are_forwarded_with_unknown_fields(gateway, mock, gw_headers):
    base = mock.scenario()
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],  "custom_vendor_field":{"x":[1,2]}}'
    resp = post(chat_url(gateway), body, gw_headers(base + "/v1"))
    assert resp.status == 200
    sent = mock.calls(base)["requests"][0]
    assert sent["body"] == body.decode()
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"


def test_gateway_headers_never_go_upstream_and_only_named_headers_are_forwarded(gateway, mock, gw_headers):
    base = mock.scenario()
    headers = gw_headers(base + "/v1", **{
        "x-gateway-forward-headers": "x-team, X-Tenant, x-secret",
        "x-gateway-sensitive-headers": "x-secret",
        "x-gateway-metadata": '{"_user": "u1"}',
        "x-team": "blue", "x-tenant": "t9", "x-secret": "hush", "x-not-listed": "nope",
    })
    assert post(chat_url(gateway), CHAT, headers).status == 200
    sent = mock.calls(base)["requests"][0]["headers"]
    assert sent["x-team"] == "blue" and sent["x-tenant"] == "t9"
    assert "x-secret" not in sent and "x-not-listed" not in sent
    assert not [h for h in sent if h.startswith("x-gateway-")]
    assert ADMIN_KEY not in str(sent)


def test_forward_headers_accepts_a_json_array(gateway, mock, gw_headers):
    base = mock.scenario()
    headers = gw_headers(base + "/v1", **{"x-gateway-forward-headers": '["x-a"]', "x-a": "1"})
    assert post(chat_url(gateway), CHAT, headers).status == 200
    assert mock.calls(base)["requests"][0]["headers"]["x-a"] == "1"


def test_trace_id_is_echoed_or_generated(gateway, mock, gw_headers):
    given = post(chat_url(gateway), CHAT, gw_headers(mock.url + "/v1", **{"x-gateway-trace-id": "trace-123"}))
    assert given.headers["x-gateway-trace-id"] == "trace-123"
    made = post(chat_url(gateway), CHAT, gw_headers(mock.url + "/v1"))
    assert len(made.headers["x-gateway-trace-id"]) >= 16
    bad = post(chat_url(gateway), {"model": "m"}, gw_headers(mock.url + "/v1", **{"x-gateway-trace-id": "t-err"}))
    assert bad.status == 400 and bad.headers["x-gateway-trace-id"] == "t-err"


def test_config_header_with_provider_api_key_and_custom_host(gateway, mock):
    base = mock.scenario()
    config = {"provider": "vendorA", "api_key": "sk-from-config", "custom_host": base + "/v1"}
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
               "content-type": "application/json"}
    resp = post(chat_url(gateway), CHAT, headers)
    assert resp.status == 200, resp.text
    assert mock.calls(base)["requests"][0]["headers"]["authorization"] == "Bearer sk-from-config"


def test_snake_and_camel_spellings_of_gateway_headers(gateway, mock):
    base = mock.scenario()
    headers = {"x-gateway-api_key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-customHost": base + "/v1",
               "authorization": "Bearer sk-z"}
    resp = post(chat_url(gateway), CHAT, headers)
    assert resp.status == 200, resp.text


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({**CHAT, "temperature": 2.5}, "temperature"),
        ({**CHAT, "top_p": 1.5}, "top_p"),
        ({**CHAT, "frequency_penalty": -3}, "frequency_penalty"),
        ({**CHAT, "presence_penalty": 2.1}, "presence_penalty"),
        ({**CHAT, "n": 0}, "n"),
        ({**CHAT, "n": 129}, "n"),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({**CHAT, "top_logprobs": 3}, "top_logprobs"),
        ({**CHAT, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({**CHAT, "logit_bias": {"50256": -101}}, "logit_bias"),
        ({**CHAT, "tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]}, "tools"),
        ({**CHAT, "tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({**CHAT, "tool_choice": "sometimes"}, "tool_choice"),
        ({**CHAT, "stream_options": {"include_usage": True}}, "stream_options"),
        ({**CHAT, "temperature": "hot"}, "temperature"),
        ({**CHAT, "metadata": {f"tag{i}": "x" for i in range(17)}}, "metadata"),
        ({**CHAT, "metadata": {"ticket": "x" * 513}}, "metadata.ticket"),
    ],
)
def test_invalid_bodies_get_400_naming_the_field_and_never_reach_upstream(gateway, mock, gw_headers, body, param):
    base = mock.scenario()
    resp = post(chat_url(gateway), body, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param
    assert param.split("[")[0].split(".")[0] in error["message"]
    assert error["type"] == "invalid_request_error"
    assert mock.calls(base)["calls"] == 0


def test_malformed_json_body_is_400(gateway, mock, gw_headers):
    resp = post(chat_url(gateway), b'{"model": "m", "messages": [', gw_headers(mock.url + "/v1"))
    assert resp.status == 400
    assert "JSON" in resp.json()["error"]["message"]


def test_sdk_raises_bad_request_with_gateway_message(openai_client):
    client = openai_client()
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], temperature=9)
    assert "temperature" in str(info.value)


def test_upstream_error_is_relayed_with_status_message_and_provider(gateway, mock, gw_headers):
    base = mock.scenario([{"status": 429, "message": "slow down please", "retry_after": "7"}])
    resp = post(chat_url(gateway), CHAT, gw_headers(base + "/v1"))
    assert resp.status == 429
    doc = resp.json()
    assert doc["error"]["message"] == "slow down please"
    assert doc["provider"] == "vendorA"
    assert resp.headers["retry-after"] == "7"


def test_html_answer_is_a_502_naming_the_provider(gateway, mock, gw_headers):
    base = mock.scenario([{"html": True}])
    resp = post(chat_url(gateway), CHAT, gw_headers(base + "/v1"))
    assert resp.status == 502
    assert "vendorA" in resp.json()["error"]["message"]


def test_unreachable_upstream_is_502(gateway, gw_headers):
    from tests.support.servers import free_port

    port = free_port()
    resp = post(chat_url(gateway), CHAT, gw_headers(f"http://127.0.0.1:{port}/v1"))
    assert resp.status == 502
    error = resp.json()["error"]
    assert error["code"] == "upstream_unreachable"
    # in words, without asyncio's "Connect call failed ('127.0.0.1', 19799)"
    assert f"upstream 127.0.0.1:{port} is unreachable (connection refused)" in error["message"], error
    assert "('" not in error["message"] and "Connect call" not in error["message"]


@pytest.mark.serial  # a time bound that a busy machine could break
def test_request_timeout_header_answers_408_promptly(gateway, mock, gw_headers):
    import time

    base = mock.scenario([{"delay_ms": 3000}])
    started = time.monotonic()
    resp = post(chat_url(gateway), CHAT, gw_headers(base + "/v1", **{"x-gateway-request-timeout": "300"}))
    assert resp.status == 408
    assert time.monotonic() - started < 2.5


def test_first_stream_event_error_becomes_a_real_status(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "first", "message": "model overloaded"}])
    resp = post(chat_url(gateway), {**CHAT, "stream": True}, gw_headers(base + "/v1"))
    assert resp.status >= 400
    assert "model overloaded" in resp.json()["error"]["message"]


def test_stream_error_midway_ends_with_error_event_and_done(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "middle", "message": "broke midway"}])
    status, _, events = stream_events(chat_url(gateway), {**CHAT, "stream": True}, gw_headers(base + "/v1"))
    payloads = list(events)
    assert status == 200
    assert payloads[-1] == b"[DONE]"
    assert b"broke midway" in payloads[-2]
    assert b'"error"' in payloads[-2]


def test_stream_cut_midway_ends_with_error_event_and_done(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "cut"}])
    status, _, events = stream_events(chat_url(gateway), {**CHAT, "stream": True}, gw_headers(base + "/v1"))
    payloads = list(events)
    assert status == 200
    assert payloads[-1] == b"[DONE]"
    assert b'"error"' in payloads[-2]


def test_400_concurrent_requests_each_get_their_own_answer(gateway, mock, gw_headers):
    headers = gw_headers(mock.url + "/v1")

    def one(i: int) -> str:
        body = {"model": f"model-{i}", "messages": [{"role": "user", "content": f"request {i}"}]}
        resp = post(chat_url(gateway), body, headers, timeout=60)
        assert resp.status == 200, resp.text
        return resp.json()["model"]

    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        models = list(pool.map(one, range(400)))
    assert models == [f"model-{i}" for i in range(400)]


def test_one_megabyte_prompt_goes_through_intact(gateway, mock, gw_headers):
    base = mock.scenario()
    prompt = "x" * (1024 * 1024)
    resp = post(chat_url(gateway), {"model": "m", "messages": [{"role": "user", "content": prompt}]},
                gw_headers(base + "/v1"))
    assert resp.status == 200
    sent = msgspec.json.decode(mock.calls(base)["requests"][0]["body"])
    assert sent["messages"][0]["content"] == prompt


def test_health_needs_no_key_and_reports_backend(gateway):
    resp = request("GET", gateway.url + "/health")
    assert resp.status == 200
    doc = resp.json()
    assert doc["status"] == "ok" and doc["version"] and doc["state_backend"] == "embedded"
    assert doc["state"] == {"backend": "embedded", "healthy": True, "fail_mode": "open"}
    assert set(doc["speedups"]) >= {"sse", "conditions"}
