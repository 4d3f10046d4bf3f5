"""The Responses API and Messages API doors through the real gateway against the mock, with the official SDKs:
forwarded to a provider that serves the dialect, translated for the others (anthropic, cloudA, cloudC for the
Responses API; vendorA, cloudA, cloudC for the Messages API), streams, tool round trips, stored responses,
count_tokens, fallback across dialects, errors in the dialect's shape and the single-token authentication."""

from __future__ import annotations

import uuid

import msgspec
import pytest
from openai import OpenAI
from pydantic import BaseModel

from gateway_mock.cloudA import CREDENTIALS
from gateway_mock.cloudC import TEST_TOKEN
from gateway_mock.kit import DEFAULT_REPLY
from tests.observability.test_logs import wait_logs
from tests.support.http import post, request
from tests.support.policies import ADMIN, RATE, rate_limit, tag
from tests.support.poll import wait_for
from tests.support.servers import ADMIN_KEY

anthropic = pytest.importorskip("anthropic")

TOOL = {"type": "function", "name": "get_weather", "description": "Current weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}
A_TOOL = {"name": "get_weather", "description": "Current weather",
          "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}
MODELS = {"vendorA": "gpt-4o-mini", "anthropic": "claude-3-5-sonnet-20240620",
          "cloudA": "anthropic.claude-3-5-sonnet-20240620-v1:0", "cloudC": "gemini-2.0-flash"}
#: models each provider reaches through translation on the Messages door (cloudA's anthropic models are forwarded)
TRANSLATED_MODELS = {**MODELS, "cloudA": "meta.llama3-70b-instruct-v1:0"}


def target(provider: str, base: str) -> dict:
    if provider == "vendorA":
        return {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1"}
    if provider == "anthropic":
        return {"provider": "anthropic", "api_key": "sk-ant-test", "custom_host": base + "/v1"}
    if provider == "cloudA":
        key = "AKIDMOCKEXAMPLE"
        return {"provider": "cloudA", "cloudA_access_key_id": key, "cloudA_secret_access_key": CREDENTIALS[key][0],
                "cloudA_region": "us-east-1", "custom_host": base}
    return {"provider": "cloudC", "api_key": TEST_TOKEN, "custom_host": base + "/v1", "cloudC_project_id": "proj-1",
            "cloudC_region": "us-central1"}


def _body(request: dict) -> dict:
    body = request["body"]
    return msgspec.json.decode(body) if isinstance(body, (str, bytes)) else body


def config_header(cfg: dict) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(cfg).decode()}


def openai_for(gateway, cfg: dict) -> OpenAI:
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", default_headers=config_header(cfg),
                  max_retries=0, timeout=60, http_client=gateway.http_client())


def anthropic_for(gateway, cfg: dict):
    return anthropic.Anthropic(base_url=gateway.url, api_key="unused", default_headers=config_header(cfg),
                               max_retries=0, timeout=60, http_client=gateway.http_client("httpx2"))


RESPONSES_PROVIDERS = ["vendorA", "anthropic", "cloudA", "cloudC"]
MESSAGES_PROVIDERS = ["anthropic", "vendorA", "cloudA", "cloudC"]


@pytest.mark.parametrize("provider", RESPONSES_PROVIDERS)
def test_responses_create_plain_and_streamed(gateway, mock, provider):
    client = openai_for(gateway, target(provider, mock.url))
    response = client.responses.create(model=MODELS[provider], input="Say hi", instructions="Be brief")
    assert response.output_text == DEFAULT_REPLY
    assert response.status == "completed"
    assert response.usage is not None and response.usage.total_tokens > 0
    with client.responses.stream(model=MODELS[provider], input=[{"role": "user", "content": "Say hi"}]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == DEFAULT_REPLY
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds and kinds[-1] == "response.completed"


@pytest.mark.parametrize("provider", RESPONSES_PROVIDERS)
def test_responses_tool_round_trip(gateway, mock, provider):
    base = mock.scenario([{"tool_call": True}, {}])
    client = openai_for(gateway, target(provider, base))
    first = client.responses.create(model=MODELS[provider], input="Weather in Paris?", tools=[TOOL])
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls and calls[0].name == "get_weather"
    assert isinstance(msgspec.json.decode(calls[0].arguments), dict)
    second = client.responses.create(model=MODELS[provider], tools=[TOOL], input=[
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather", "arguments": calls[0].arguments},
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}])
    assert second.output_text == DEFAULT_REPLY


class Weather(BaseModel):
    location: str
    celsius: int


@pytest.mark.parametrize("provider", RESPONSES_PROVIDERS)
def test_responses_parse_text_format(gateway, mock, provider):
    client = openai_for(gateway, target(provider, mock.url))
    parsed = client.responses.parse(model=MODELS[provider], input="Weather in Paris as JSON", text_format=Weather)
    assert isinstance(parsed.output_parsed, Weather)


@pytest.mark.parametrize("provider", ["anthropic", "cloudC"])
def test_previous_response_id_continues_a_translated_response(gateway, mock, provider):
    base = mock.scenario([{"reply": "Your name is Ada."}])
    client = openai_for(gateway, target(provider, base))
    first = client.responses.create(model=MODELS[provider], input="My name is Ada.")
    second = client.responses.create(model=MODELS[provider], input="What is my name?",
                                     previous_response_id=first.id)
    assert second.previous_response_id == first.id
    sent = mock.calls(base)["requests"][-1]["body"]
    assert "My name is Ada." in str(sent) and "Your name is Ada." in str(sent)
    assert client.responses.retrieve(first.id).id == first.id


def test_previous_response_id_unknown_is_404(gateway, mock):
    client = openai_for(gateway, target("anthropic", mock.url))
    with pytest.raises(Exception) as caught:
        client.responses.create(model=MODELS["anthropic"], input="hi", previous_response_id="resp_nope")
    assert getattr(caught.value, "status_code", None) == 404


def test_responses_builtin_tool_on_translated_target_is_400(gateway, mock):
    answer = post(f"{gateway.url}/v1/responses", {"model": "claude-3-5-sonnet-20240620", "input": "hi",
                                                  "tools": [{"type": "web_search"}]},
                  {**config_header(target("anthropic", mock.url)), "content-type": "application/json"})
    body = msgspec.json.decode(answer.body)
    assert answer.status == 400
    assert "web_search" in body["error"]["message"] and body["error"]["param"] == "tools[0].type"


def test_responses_bad_input_names_the_field(gateway, mock):
    answer = post(f"{gateway.url}/v1/responses", {"model": "gpt-4o-mini"},
                  {**config_header(target("vendorA", mock.url)), "content-type": "application/json"})
    assert answer.status == 400 and msgspec.json.decode(answer.body)["error"]["param"] == "input"


@pytest.mark.parametrize("provider", MESSAGES_PROVIDERS)
def test_messages_create_plain_and_streamed(gateway, mock, provider):
    client = anthropic_for(gateway, target(provider, mock.url))
    message = client.messages.create(model=TRANSLATED_MODELS[provider], max_tokens=256, system="Be brief",
                                     messages=[{"role": "user", "content": "Say hi"}])
    assert message.type == "message" and message.stop_reason == "end_turn"
    assert message.content[0].text == DEFAULT_REPLY
    assert message.usage.output_tokens > 0
    with client.messages.stream(model=TRANSLATED_MODELS[provider], max_tokens=256,
                                messages=[{"role": "user", "content": "Say hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == DEFAULT_REPLY
    assert final.content[0].text == DEFAULT_REPLY and final.stop_reason == "end_turn"


@pytest.mark.parametrize("provider", MESSAGES_PROVIDERS)
def test_messages_tool_round_trip(gateway, mock, provider):
    base = mock.scenario([{"tool_call": True}, {}])
    client = anthropic_for(gateway, target(provider, base))
    first = client.messages.create(model=TRANSLATED_MODELS[provider], max_tokens=256, tools=[A_TOOL],
                                   messages=[{"role": "user", "content": "Weather in Paris?"}])
    assert first.stop_reason == "tool_use"
    use = next(block for block in first.content if block.type == "tool_use")
    assert use.name == "get_weather" and isinstance(use.input, dict)
    second = client.messages.create(model=TRANSLATED_MODELS[provider], max_tokens=256, tools=[A_TOOL], messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}])
    assert second.content[0].text == DEFAULT_REPLY


@pytest.mark.parametrize("provider", MESSAGES_PROVIDERS)
def test_messages_count_tokens(gateway, mock, provider):
    client = anthropic_for(gateway, target(provider, mock.url))
    raw = client.messages.with_raw_response.count_tokens(model=TRANSLATED_MODELS[provider],
                                                         messages=[{"role": "user", "content": "Say hi"}])
    assert raw.parse().input_tokens > 0
    estimated = raw.headers.get("x-gateway-token-count") == "estimate"
    assert estimated == (provider != "anthropic")


def test_messages_forwarded_keeps_the_body_and_version_headers(gateway, mock):
    base = mock.scenario([{}])
    client = anthropic_for(gateway, target("anthropic", base))
    client.messages.create(model=MODELS["anthropic"], max_tokens=64, extra_body={"top_k": 5},
                           messages=[{"role": "user", "content": "hi"}],
                           extra_headers={"anthropic-beta": "tools-2024-05-16"})
    sent = mock.calls(base)["requests"][0]
    assert sent["path"].endswith("/v1/messages")
    assert sent["headers"]["anthropic-beta"] == "tools-2024-05-16"
    assert sent["headers"]["x-api-key"] == "sk-ant-test"
    assert _body(sent)["top_k"] == 5


def test_messages_errors_in_anthropic_shape(gateway, mock):
    base = mock.scenario([{"status": 429, "message": "slow down"}])
    client = anthropic_for(gateway, target("vendorA", base))
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model="gpt-4o-mini", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                               max_tokens=None)  # type: ignore[arg-type]
    assert "max_tokens" in bad.value.message


BAD_MESSAGES = [
    ({"messages": [None]}, "messages[0]"),
    ({"tools": [1]}, "tools[0]"),
    ({"messages": [{"role": "user", "content": [7]}]}, "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"system": [{"type": "image"}]}, "system"),
]


@pytest.mark.parametrize("provider", ["anthropic", "vendorA"], ids=["forwarded", "translated"])
@pytest.mark.parametrize(("change", "field"), BAD_MESSAGES)
def test_a_malformed_messages_body_is_a_400_naming_the_field_on_either_path(gateway, mock, provider, change, field):
    base = mock.scenario()
    body = {"model": MODELS["anthropic"] if provider == "anthropic" else "gpt-4o-mini", "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}], **change}
    answer = post(f"{gateway.url}/v1/messages", body,
                  {**config_header(target(provider, base)), "content-type": "application/json"})
    assert answer.status == 400, answer.text
    error = msgspec.json.decode(answer.body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert field in error["error"]["message"], error
    assert mock.calls(base)["calls"] == 0


BAD_RESPONSES = [
    ({"input": [None]}, "input[0]"),
    ({"tools": [1]}, "tools[0]"),
    ({"tools": [{"type": "function"}]}, "tools[0].name"),
    ({"input": [{"role": "user"}]}, "input[0].content"),
    ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"tool_choice": 3}, "tool_choice"),
]


@pytest.mark.parametrize("provider", ["vendorA", "anthropic"], ids=["forwarded", "translated"])
@pytest.mark.parametrize(("change", "field"), BAD_RESPONSES)
def test_a_malformed_responses_body_is_a_400_naming_the_field_on_either_path(gateway, mock, provider, change,
                                                                            field):
    base = mock.scenario()
    body = {"model": MODELS[provider], "input": "hi", **change}
    answer = post(f"{gateway.url}/v1/responses", body,
                  {**config_header(target(provider, base)), "content-type": "application/json"})
    assert answer.status == 400, answer.text
    assert msgspec.json.decode(answer.body)["error"]["param"] == field
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize(("path", "provider", "body"), [
    ("/v1/responses", "vendorA", {"model": "gpt-4o-mini", "input": "hi"}),
    ("/v1/messages", "anthropic", {"model": "claude-3-5-sonnet-20240620", "max_tokens": 16,
                                   "messages": [{"role": "user", "content": "hi"}]}),
])
def test_a_forwarded_answer_that_is_not_json_is_a_502_naming_the_provider(gateway, mock, path, provider, body):
    base = mock.scenario([{"html": True}])
    answer = post(f"{gateway.url}{path}", body,
                  {**config_header(target(provider, base)), "content-type": "application/json"})
    assert answer.status == 502, answer.text
    assert mock.calls(base)["calls"] == 1
    doc = msgspec.json.decode(answer.body)
    assert provider in doc["error"]["message"] and "malformed" in doc["error"]["message"]


def test_fallback_crosses_dialects(gateway, mock):
    failing = mock.scenario([{"status": 500}])
    cfg = {"strategy": {"mode": "fallback"},
           "targets": [target("vendorA", failing), target("anthropic", mock.url)]}
    client = openai_for(gateway, cfg)
    raw = client.responses.with_raw_response.create(model="claude-3-5-sonnet-20240620", input="hi")
    assert raw.headers["x-gateway-provider"] == "anthropic"
    assert raw.parse().output_text == DEFAULT_REPLY
    cfg = {"strategy": {"mode": "fallback"},
           "targets": [target("anthropic", failing), target("vendorA", mock.url)]}
    message = anthropic_for(gateway, cfg).messages.create(model="gpt-4o-mini", max_tokens=32,
                                                          messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == DEFAULT_REPLY


def test_single_token_is_the_gateway_key(gateway, mock):
    """Without x-gateway-api-key the client's one token (x-api-key or bearer) is the gateway key, never sent on."""
    base = mock.scenario([{}])
    cfg = msgspec.json.encode(target("anthropic", base)).decode()
    client = anthropic.Anthropic(base_url=gateway.url, api_key=ADMIN_KEY, default_headers={"x-gateway-config": cfg},
                                 max_retries=0, http_client=gateway.http_client("httpx2"))
    message = client.messages.create(model=MODELS["anthropic"], max_tokens=256,
                                     messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == DEFAULT_REPLY
    assert mock.calls(base)["requests"][0]["headers"]["x-api-key"] == "sk-ant-test"
    bad = anthropic.Anthropic(base_url=gateway.url, api_key="not-a-key", default_headers={"x-gateway-config": cfg},
                              max_retries=0, http_client=gateway.http_client("httpx2"))
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model=MODELS["anthropic"], max_tokens=16, messages=[{"role": "user", "content": "hi"}])


DOORS = [("/v1/responses", "claude-3-5-sonnet-20240620", {"input": "four words right here"}),
         ("/v1/messages", "gpt-4o-mini", {"max_tokens": 64,
                                          "messages": [{"role": "user", "content": "four words right here"}]})]


def door_post(gateway, path: str, cfg: dict, body: dict, **extra: str):
    headers = {**config_header(cfg), "content-type": "application/json", **extra}
    return post(gateway.url + path, body, headers)


@pytest.mark.parametrize(("path", "model", "body"), DOORS)
def test_cache_guardrail_rate_limit_and_log_apply_on_each_door(gateway, mock, path, model, body):
    provider = "anthropic" if path == "/v1/responses" else "vendorA"
    base = mock.scenario([{}])
    cached = {**target(provider, base), "cache": {"mode": "simple"}}
    doc = {"model": model, **body, "metadata": {"user_id": uuid.uuid4().hex}} if path == "/v1/messages" else {
        "model": model, **body, "user": uuid.uuid4().hex}
    first = door_post(gateway, path, cached, doc)
    second = door_post(gateway, path, cached, doc)
    assert first.status == second.status == 200
    assert first.headers["x-gateway-cache-status"] == "MISS" and second.headers["x-gateway-cache-status"] == "HIT"
    assert mock.calls(base)["calls"] == 1
    assert second.json().get("type", second.json().get("object")) in ("message", "response")

    guarded = {**target(provider, base), "input_guardrails": [
        {"default.wordCount": {"maxWords": 3}, "deny": True}]}
    denied = door_post(gateway, path, guarded, doc)
    assert denied.status == 446
    softened = {**target(provider, base), "input_guardrails": [
        {"default.wordCount": {"maxWords": 3}, "deny": False}]}
    flagged = door_post(gateway, path, softened, doc)
    assert flagged.status == 246 and flagged.json()["hook_results"]["before_request_hooks"]

    run = tag()
    policy_id = rate_limit(gateway, run, 0)
    try:
        limited = door_post(gateway, path, target(provider, base), doc,
                            **{"x-gateway-metadata": msgspec.json.encode({"run": run}).decode()})
        assert limited.status == 429
        shape = limited.json()
        assert (shape["type"] == "error" and shape["error"]["type"] == "rate_limit_error") if path == "/v1/messages" \
            else shape["error"]["message"]
    finally:
        request("DELETE", f"{gateway.url}{RATE}/{policy_id}", headers=ADMIN)

    trace = f"trace-{uuid.uuid4().hex}"
    assert door_post(gateway, path, target(provider, base), doc, **{"x-gateway-trace-id": trace}).status == 200
    (item,) = wait_logs(gateway, trace)
    assert item["endpoint"] == path.rsplit("/", 1)[1] and item["provider"] == provider and item["status"] == 200
    assert item["usage"]["total_tokens"] > 0 if isinstance(item.get("usage"), dict) else True


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages"])
def test_a_stream_that_fails_midway_ends_with_the_dialect_error_event(gateway, mock, path):
    base = mock.scenario([{"stream_error": "middle"}])
    provider = "anthropic" if path == "/v1/responses" else "vendorA"
    body = {"model": "m", "stream": True, **({"input": "hi"} if path == "/v1/responses" else {
        "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})}
    answer = door_post(gateway, path, target(provider, base), body)
    text = answer.body.decode()
    assert answer.status == 200 and "event: error" in text and "[DONE]" not in text


def test_stored_responses_stream_items_delete_and_forwarded_continuation(gateway, mock):
    client = openai_for(gateway, target("anthropic", mock.url))
    with client.responses.stream(model=MODELS["anthropic"], input="Remember 42.") as stream:
        for _ in stream:
            pass
        first = stream.get_final_response()
    items = client.responses.input_items.list(first.id)
    assert [item.content[0].text for item in items.data] == ["Remember 42."]
    follow = client.responses.create(model=MODELS["anthropic"], input="Which number?", previous_response_id=first.id)
    assert follow.output_text == DEFAULT_REPLY
    assert client.responses.delete(first.id) is None
    with pytest.raises(Exception) as gone:
        client.responses.retrieve(first.id)
    assert getattr(gone.value, "status_code", None) == 404
    # a vendorA response id is continued by vendorA itself: forwarded, not looked up here
    forwarded = openai_for(gateway, target("vendorA", mock.url))
    earlier = forwarded.responses.create(model="gpt-4o-mini", input="hi")
    later = forwarded.responses.create(model="gpt-4o-mini", input="again", previous_response_id=earlier.id)
    assert later.previous_response_id == earlier.id


def test_doors_are_counted_in_metrics_by_endpoint(gateway, mock):
    anthropic_for(gateway, target("vendorA", mock.url)).messages.create(
        model="gpt-4o-mini", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    openai_for(gateway, target("vendorA", mock.url)).responses.create(model="gpt-4o-mini", input="hi")

    def counted() -> bool:  # a worker writes its request metrics about once a second, off the request path
        text = request("GET", f"{gateway.url}/metrics", headers={"x-gateway-api-key": ADMIN_KEY}).body.decode()
        return 'endpoint="messages"' in text and 'endpoint="responses"' in text

    assert wait_for(counted, timeout=10)


def test_forwarded_stream_keeps_the_provider_bytes(gateway, mock):
    base = mock.scenario([{"tool_call": True}])
    client = openai_for(gateway, target("vendorA", base))
    with client.responses.stream(model="gpt-4o-mini", input="Weather?", tools=[TOOL]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert final.output[0].type == "function_call" and final.id.startswith("resp_")


def test_messages_to_a_cloudC_claude_model_are_forwarded_in_anthropic_body(gateway, mock):
    base = mock.scenario([{}])
    client = anthropic_for(gateway, target("cloudC", base))
    model = "claude-3-5-sonnet-v2@20241022"
    message = client.messages.create(model=model, max_tokens=256, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == DEFAULT_REPLY and message.id.startswith("msg_")
    with client.messages.stream(model=model, max_tokens=256, messages=[{"role": "user", "content": "hi"}]) as stream:
        assert "".join(stream.text_stream) == DEFAULT_REPLY
    counted = client.messages.with_raw_response.count_tokens(model=model, messages=[{"role": "user", "content": "hi"}])
    assert counted.parse().input_tokens > 0 and "x-gateway-token-count" not in counted.headers
    sent = mock.calls(base)["requests"]
    assert [r["path"].rsplit("/", 1)[1] for r in sent] == [f"{model}:rawPredict", f"{model}:streamRawPredict",
                                                          "count-tokens:rawPredict"]
    first = _body(sent[0])
    assert first["anthropic_version"] == "vertex-2023-10-16" and "model" not in first


def test_messages_to_a_cloudA_anthropic_model_go_through_invoke_model(gateway, mock):
    base = mock.scenario([{}])
    client = anthropic_for(gateway, target("cloudA", base))
    model = MODELS["cloudA"]
    message = client.messages.create(model=model, max_tokens=256, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == DEFAULT_REPLY
    with client.messages.stream(model=model, max_tokens=256, messages=[{"role": "user", "content": "hi"}]) as stream:
        assert "".join(stream.text_stream) == DEFAULT_REPLY
        assert stream.get_final_message().usage.output_tokens > 0
    sent = mock.calls(base)["requests"]
    assert [r["path"].rsplit("/", 1)[1] for r in sent] == ["invoke", "invoke-with-response-stream"]
    assert _body(sent[0])["anthropic_version"] == "bedrock-2023-05-31"
    # count_tokens has no InvokeModel form: estimated
    counted = client.messages.with_raw_response.count_tokens(model=model, messages=[{"role": "user", "content": "hi"}])
    assert counted.headers["x-gateway-token-count"] == "estimate"


def test_responses_to_cloudB_are_forwarded_on_the_resource(gateway, mock):
    base = mock.scenario([{}])
    cfg = {"provider": "cloudB", "api_key": "az-key-1", "custom_host": base + "/openai", "deployment_id": "gpt4o",
           "api_version": "2025-03-01-preview"}
    client = openai_for(gateway, cfg)
    assert client.responses.create(model="gpt4o", input="hi").output_text == DEFAULT_REPLY
    with client.responses.stream(model="gpt4o", input="hi") as stream:
        for _ in stream:
            pass
        assert stream.get_final_response().output_text == DEFAULT_REPLY
    sent = mock.calls(base)["requests"][0]
    assert sent["path"].endswith("/openai/responses") and "api-version=2025-03-01-preview" in sent["query"]
    assert sent["headers"]["api-key"] == "az-key-1"


def test_a_cached_answer_is_replayed_as_the_dialect_stream(gateway, mock):
    base = mock.scenario([{}])
    cfg = {**target("vendorA", base), "cache": {"mode": "simple"}}
    client = anthropic_for(gateway, cfg)
    prompt = [{"role": "user", "content": f"cache me {uuid.uuid4().hex}"}]
    texts = []
    for _ in range(2):
        with client.messages.stream(model="gpt-4o-mini", max_tokens=256, messages=prompt) as stream:
            texts.append("".join(stream.text_stream))
            assert stream.get_final_message().stop_reason == "end_turn"
    assert texts == [DEFAULT_REPLY, DEFAULT_REPLY]
    assert mock.calls(base)["calls"] == 1
