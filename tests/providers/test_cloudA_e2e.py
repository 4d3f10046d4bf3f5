"""cloudA through the real gateway against the signature-verifying mock: JSON, streams, tools, tokens and errors."""

from __future__ import annotations

import http.server
import threading

import msgspec
import openai
import pytest
from openai import OpenAI

from gateway.providers.cloudA import sigv4
from gateway_mock.cloudA import CREDENTIALS
from gateway_mock.kit import DEFAULT_REPLY
from tests.support.http import post, stream_events
from tests.support.servers import ADMIN_KEY

KEY = "AKIDMOCKEXAMPLE"
SECRET = CREDENTIALS[KEY][0]
TEMP_KEY = "ASIAMOCKEXAMPLE"
TEMP_SECRET, TOKEN = CREDENTIALS[TEMP_KEY]
MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"location": {"type": "string"}}}}}
CHAT = {"model": MODEL, "messages": [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "Say hello"}]}


def url(gateway) -> str:
    return f"{gateway.url}/v1/chat/completions"


def config_headers(base: str, **config) -> dict[str, str]:
    doc = {"provider": "cloudA", "cloudA_access_key_id": KEY, "cloudA_secret_access_key": SECRET,
           "cloudA_region": "us-east-1", "custom_host": base, **config}
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(doc).decode(),
            "content-type": "application/json"}


def provider_headers(base: str, key: str = KEY, secret: str = SECRET, token: str | None = None) -> dict[str, str]:
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "cloudA", "x-gateway-custom-host": base,
               "x-gateway-cloudA-access-key-id": key, "x-gateway-cloudA-secret-access-key": secret,
               "x-gateway-cloudA-region": "us-west-2", "content-type": "application/json"}
    if token:
        headers["x-gateway-cloudA-session-token"] = token
    return headers


def sdk(gateway, headers: dict[str, str]) -> OpenAI:
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", default_headers=headers, max_retries=0, timeout=60,
                  http_client=gateway.http_client())


def test_non_streamed_chat_is_signed_verified_and_mapped(gateway, mock):
    base = mock.scenario()
    resp = post(url(gateway), CHAT, config_headers(base))
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert doc["object"] == "chat.completion" and doc["id"].startswith("chatcmpl-") and doc["model"] == MODEL
    assert doc["choices"][0]["message"]["content"] == DEFAULT_REPLY
    assert doc["choices"][0]["finish_reason"] == "stop"
    assert doc["usage"]["total_tokens"] == doc["usage"]["prompt_tokens"] + doc["usage"]["completion_tokens"] > 0
    assert resp.headers["x-gateway-provider"] == "cloudA"
    [seen] = mock.calls(base)["requests"]
    assert seen["path"] == f"/model/{MODEL}/converse"
    sent = msgspec.json.decode(seen["body"])
    assert sent == {"messages": [{"role": "user", "content": [{"text": "Say hello"}]}],
                    "system": [{"text": "Be brief."}]}
    assert "Credential=AKIDMOCKEXAMPLE/" in seen["headers"]["authorization"]
    assert "/us-east-1/bedrock/aws4_request" in seen["headers"]["authorization"]
    # the signature covers the exact bytes on the wire: the encoded model id, encoded once more when canonicalised
    path = base.split(mock.url, 1)[1] + "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    parsed = sigv4.parse_authorization(seen["headers"]["authorization"])
    assert sigv4.verify("POST", path, "", seen["headers"], seen["body"].encode(), SECRET, parsed)


class _Capture(http.server.BaseHTTPRequestHandler):
    lines: list[str] = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Capture.lines.append(f"{self.command} {self.path} {self.headers.get('host')}")
        body = msgspec.json.encode({"output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
                                    "stopReason": "end_turn",
                                    "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_model_id_travels_percent_encoded_and_the_host_keeps_its_port(gateway):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        resp = post(url(gateway), {**CHAT, "model": "arn:aws:bedrock:us-east-1:123:inference-profile/us.x-v1:0"},
                    config_headers(f"http://127.0.0.1:{port}/prefix"))
        assert resp.status == 200, resp.text
    finally:
        server.shutdown()
    assert _Capture.lines[-1] == (f"POST /prefix/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile"
                                  f"%2Fus.x-v1%3A0/converse 127.0.0.1:{port}")


def test_streamed_chat_with_the_sdk_reassembles_reply_finish_and_usage(gateway, mock):
    base = mock.scenario([{"chunks": 12}])
    client = sdk(gateway, config_headers(base))
    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT["messages"], stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "".join(DEFAULT_REPLY.split(" ")[i] if i == 0 else " " + DEFAULT_REPLY.split(" ")[i]
                           for i in range(12))
    assert len({c.id for c in chunks}) == 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert mock.calls(base)["requests"][0]["path"] == f"/model/{MODEL}/converse-stream"


def test_provider_headers_identify_cloudA_with_its_region(gateway, mock):
    base = mock.scenario([{"reply": "from headers"}])
    resp = post(url(gateway), CHAT, provider_headers(base))
    assert resp.status == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "from headers"
    auth = mock.calls(base)["requests"][0]["headers"]["authorization"]
    assert "/us-west-2/bedrock/aws4_request" in auth


def test_session_token_is_sent_and_signed(gateway, mock):
    base = mock.scenario()
    resp = post(url(gateway), CHAT, provider_headers(base, TEMP_KEY, TEMP_SECRET, TOKEN))
    assert resp.status == 200, resp.text
    seen = mock.calls(base)["requests"][0]["headers"]
    assert seen["x-amz-security-token"] == TOKEN
    assert "x-amz-security-token" in sigv4.parse_authorization(seen["authorization"]).signed_headers
    # the same temporary key in a config, with the token missing, is refused by the mock
    refused = post(url(gateway), CHAT, config_headers(mock.scenario(), cloudA_access_key_id=TEMP_KEY,
                                                      cloudA_secret_access_key=TEMP_SECRET))
    assert refused.status == 403 and refused.json()["error"]["type"] == "UnrecognizedClientException"


def test_tool_call_answer_and_tool_result_round_trip(gateway, mock):
    base = mock.scenario([{"tool_call": True}, {}])
    ask = {**CHAT, "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER]}
    first = post(url(gateway), ask, config_headers(base))
    assert first.status == 200, first.text
    choice = first.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"location":"Paris"}'}
    follow = {**ask, "messages": [*ask["messages"], choice["message"],
                                  {"role": "tool", "tool_call_id": call["id"], "content": "18C and sunny"}]}
    second = post(url(gateway), follow, config_headers(base))
    assert second.status == 200, second.text
    sent = msgspec.json.decode(mock.calls(base)["requests"][1]["body"])
    assert sent["messages"][1]["content"] == [{"toolUse": {"toolUseId": call["id"], "name": "get_weather",
                                                           "input": {"location": "Paris"}}}]
    assert sent["messages"][2]["content"] == [{"toolResult": {"toolUseId": call["id"],
                                                              "content": [{"text": "18C and sunny"}]}}]
    assert sent["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_weather"


def test_streamed_tool_call_with_the_sdk(gateway, mock):
    base = mock.scenario([{"tool_call": True, "reply": "Let me check."}])
    client = sdk(gateway, config_headers(base))
    chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Paris?"}],
                                                 tools=[WEATHER], tool_choice="auto", stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Let me check."
    calls = [t for d in deltas for t in d.tool_calls or ()]
    assert calls[0].index == 0 and calls[0].id.startswith("tooluse_") and calls[0].function.name == "get_weather"
    assert "".join(t.function.arguments or "" for t in calls) == '{"location": "Paris"}'
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    sent = msgspec.json.decode(mock.calls(base)["requests"][0]["body"])
    assert sent["toolConfig"]["toolChoice"] == {"auto": {}}


def test_throttling_is_a_429_with_the_aws_message_and_retry_after(gateway, mock):
    base = mock.scenario([{"status": 429, "error_type": "ThrottlingException", "message": "Too many requests",
                           "retry_after": "2"}])
    resp = post(url(gateway), CHAT, config_headers(base))
    assert resp.status == 429
    assert resp.json()["error"]["message"] == "Too many requests"
    assert resp.json()["error"]["type"] == "ThrottlingException" and resp.json()["provider"] == "cloudA"
    assert resp.headers.get("retry-after") == "2"


def test_a_validation_error_from_cloudA_is_a_400(gateway, mock):
    resp = post(url(gateway), {**CHAT, "temperature": 1.5}, config_headers(mock.scenario()))
    assert resp.status == 400
    assert resp.json()["error"]["type"] == "ValidationException" and "temperature" in resp.json()["error"]["message"]


def test_exception_frame_first_is_a_real_status(gateway, mock):
    base = mock.scenario([{"stream_error": "first", "error_type": "throttlingException", "message": "Slow down"}])
    resp = post(url(gateway), {**CHAT, "stream": True}, config_headers(base))
    assert resp.status == 429 and resp.headers["content-type"].startswith("application/json")
    assert resp.json()["error"]["message"] == "Slow down" and resp.json()["error"]["type"] == "ThrottlingException"


def test_exception_frame_mid_stream_ends_with_an_error_event_and_done(gateway, mock):
    base = mock.scenario([{"stream_error": "middle", "message": "Model stream broke"}])
    status, _, events = stream_events(url(gateway), {**CHAT, "stream": True}, config_headers(base))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    error = msgspec.json.decode(payloads[-2])["error"]
    assert error["message"] == "Model stream broke" and error["type"] == "ModelStreamErrorException"
    content = [msgspec.json.decode(p)["choices"][0]["delta"].get("content") for p in payloads[:-2]]
    assert any(content)


@pytest.mark.parametrize(("config", "error_type", "text"), [
    ({"cloudA_secret_access_key": "not-the-secret"}, "InvalidSignatureException", "signature we calculated"),
    ({"cloudA_access_key_id": "AKIDUNKNOWN"}, "UnrecognizedClientException", "security token"),
])
def test_bad_credentials_are_a_403_relayed_from_cloudA(gateway, mock, config, error_type, text):
    resp = post(url(gateway), CHAT, config_headers(mock.scenario(), **config))
    assert resp.status == 403
    assert resp.json()["error"]["type"] == error_type and text in resp.json()["error"]["message"]


def test_a_missing_secret_is_a_400_naming_the_field(gateway, mock):
    headers = provider_headers(mock.scenario())
    del headers["x-gateway-cloudA-secret-access-key"]
    resp = post(url(gateway), CHAT, headers)
    assert resp.status == 400
    assert "cloudA_secret_access_key" in resp.json()["error"]["message"]


def test_n_above_one_is_a_400_naming_n(gateway, mock):
    base = mock.scenario()
    with pytest.raises(openai.BadRequestError) as info:
        sdk(gateway, config_headers(base)).chat.completions.create(model=MODEL, messages=CHAT["messages"], n=2)
    assert info.value.body["param"] == "n" and "n > 1" in info.value.body["message"]
    assert mock.calls(base)["calls"] == 0


def test_a_follow_up_without_tools_after_a_tool_round_works(gateway, mock):
    """The history's tool calls are enough: the toolConfig Converse wants is rebuilt from them."""
    base = mock.scenario([{"tool_call": True}, {"reply": "It is 18C and sunny in Paris."}])
    client = sdk(gateway, config_headers(base))
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.create(model=MODEL, messages=ask, tools=[WEATHER])
    [call] = first.choices[0].message.tool_calls
    follow = [*ask, first.choices[0].message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}),
              {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"}]
    second = client.chat.completions.create(model=MODEL, messages=follow)
    assert second.choices[0].message.content == "It is 18C and sunny in Paris."
    assert second.choices[0].finish_reason == "stop"
    sent = msgspec.json.decode(mock.calls(base)["requests"][1]["body"])
    assert sent["toolConfig"] == {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {
        "json": {"type": "object", "additionalProperties": True}}}}]}


class _NotAws(http.server.BaseHTTPRequestHandler):
    """A proxy in front of the service: errors that are not AWS-shaped."""

    def do_POST(self):  # http.server's naming
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if "/json/" in self.path:
            body, kind = b'{"error": {"message": "proxy: no healthy upstream for bedrock"}}', "application/json"
        else:
            body, kind = b"Service Unavailable: the load balancer has no healthy targets", "text/plain"
        self.send_response(503)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(("prefix", "text"), [("json", "proxy: no healthy upstream for bedrock"),
                                              ("text", "the load balancer has no healthy targets")])
def test_an_error_body_that_is_not_aws_shaped_keeps_the_upstream_message(gateway, prefix, text):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAws)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        resp = post(url(gateway), CHAT, config_headers(f"http://127.0.0.1:{server.server_address[1]}/{prefix}"))
    finally:
        server.shutdown()
    assert resp.status == 503
    assert text in resp.json()["error"]["message"] and resp.json()["provider"] == "cloudA"
