"""Request fields through the real gateway against the mock, on every chat provider: one response_format check before
any upstream call, ``x-gateway-dropped-params`` naming what a translating provider did not send (JSON and stream
answers, after a fallback, on a cached answer), and a 400 naming the field and the provider where dropping would
change the answer (``logprobs: true``), which the openai SDK raises as BadRequestError."""

from __future__ import annotations

import msgspec
import openai
import pytest
from openai import OpenAI

from gateway_mock.cloudC import TEST_TOKEN
from tests.providers import test_cloudA_e2e as cloudA
from tests.support.headers import headers_for
from tests.support.http import post, stream_events

HI = [{"role": "user", "content": "hi"}]
MODELS = {"vendorA": "gpt-test", "cloudB": "gpt-test", "anthropic": "claude-test-1", "cloudA": cloudA.MODEL,
          "cloudC": "gemini-2.0-flash"}
TRANSLATED = ["anthropic", "cloudA", "cloudC"]
DROPPED = "x-gateway-dropped-params"
#: fields some providers cannot take, and one no provider here knows; logprobs false asks for nothing
EXTRAS = {"seed": 7, "presence_penalty": 0.5, "frequency_penalty": 0.1, "logit_bias": {"50256": -100},
          "user": "u-1", "service_tier": "auto", "logprobs": False, "top_k": None}
#: what each translated provider answers it dropped for EXTRAS, in body order (top_k is null: nothing to drop)
EXPECTED = {
    "anthropic": "seed,presence_penalty,frequency_penalty,logit_bias,service_tier",
    "cloudA": "seed,presence_penalty,frequency_penalty,logit_bias,user,service_tier",
    "cloudC": "logit_bias,user,service_tier",
}


def target(provider: str, base: str, **extra) -> dict:
    """A target config for ``provider`` pointed at the mock scenario ``base``."""
    if provider == "cloudA":
        doc = {"provider": "cloudA", "cloudA_access_key_id": cloudA.KEY, "cloudA_secret_access_key": cloudA.SECRET,
               "cloudA_region": "us-east-1", "custom_host": base}
    elif provider == "cloudC":
        doc = {"provider": "cloudC", "api_key": TEST_TOKEN, "custom_host": base + "/v1",
               "cloudC_project_id": "proj-1", "cloudC_region": "us-central1"}
    elif provider == "cloudB":
        doc = {"provider": "cloudB", "api_key": "az-key-1", "custom_host": base + "/openai",
               "deployment_id": "gpt4o-prod", "api_version": "2024-10-21"}
    else:
        doc = {"provider": provider, "api_key": "sk-provider", "custom_host": base + "/v1"}
    return {**doc, **extra}


def chat(gateway, config: dict, provider: str, **fields):
    return post(f"{gateway.url}/v1/chat/completions", {"model": MODELS[provider], "messages": HI, **fields},
                headers_for(config=config))


def sent(mock, base: str) -> dict:
    return msgspec.json.decode(mock.calls(base)["requests"][0]["body"])


# --- response_format: one check, the same everywhere ----------------------------------------------------------

BAD_FORMATS = [
    ({"type": "xml"}, "response_format.type"),
    ({"json_schema": {"name": "x", "schema": {}}}, "response_format.type"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "x"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": "object"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "a city", "schema": {}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "x" * 65, "schema": {}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strict": "yes"}},
     "response_format.json_schema.strict"),
]


@pytest.mark.parametrize("provider", ["vendorA", "cloudB", *TRANSLATED])
@pytest.mark.parametrize("stream", [False, True])
def test_a_bad_response_format_is_the_same_400_on_every_provider_before_any_call(gateway, mock, provider, stream):
    base = mock.scenario()
    for response_format, param in BAD_FORMATS:
        resp = chat(gateway, target(provider, base), provider, response_format=response_format, stream=stream)
        assert resp.status == 400, (response_format, resp.text)
        error = resp.json()["error"]
        assert error["param"] == param and param in error["message"], (response_format, error)
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize("provider", ["vendorA", "cloudB", *TRANSLATED])
def test_a_good_response_format_goes_through_on_every_provider(gateway, mock, provider):
    base = mock.scenario()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "City_1", "schema": schema, "strict": True}}
    resp = chat(gateway, target(provider, base), provider, response_format=fmt)
    assert resp.status == 200, resp.text
    assert chat(gateway, target(provider, base), provider, response_format={"type": "json_object"}).status == 200


def test_the_sdk_sees_a_bad_response_format_as_bad_request(gateway, mock):
    base = mock.scenario()
    routed = headers_for(config=target("cloudC", base))
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=60,
                    default_headers={k: v for k, v in routed.items() if k != "content-type"},
                    http_client=gateway.http_client())
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODELS["cloudC"], messages=HI, response_format={"type": "json_schema"})
    assert info.value.body["param"] == "response_format.json_schema"


# --- dropped fields -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", TRANSLATED)
def test_dropped_fields_are_named_on_json_and_stream_answers(gateway, mock, provider):
    base = mock.scenario()
    config = target(provider, base)
    resp = chat(gateway, config, provider, **EXTRAS)
    assert resp.status == 200, resp.text
    assert resp.headers[DROPPED] == EXPECTED[provider]
    upstream = mock.calls(base)["requests"][0]["body"]
    for name in EXPECTED[provider].split(","):
        assert f'"{name}":' not in upstream  # really not sent (as a key, at any depth)
    status, stream_headers, events = stream_events(
        f"{gateway.url}/v1/chat/completions", {"model": MODELS[provider], "messages": HI, "stream": True, **EXTRAS},
        headers_for(config=config))
    assert status == 200 and list(events)[-1] == b"[DONE]"
    assert stream_headers[DROPPED] == EXPECTED[provider]
    plain = chat(gateway, config, provider, temperature=0.5, max_tokens=20)
    assert plain.status == 200 and DROPPED not in plain.headers


def test_cloudA_thinking_is_dropped_under_strict_compliance_only(gateway, mock):
    base = mock.scenario()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    strict = chat(gateway, target("cloudA", base), "cloudA", thinking=thinking)
    assert strict.status == 200 and strict.headers[DROPPED] == "thinking"
    loose = chat(gateway, target("cloudA", base, strict_vendorA_compliance=False), "cloudA", thinking=thinking)
    assert loose.status == 200 and DROPPED not in loose.headers
    assert "additionalModelRequestFields" in msgspec.json.decode(mock.calls(base)["requests"][1]["body"])


@pytest.mark.parametrize("provider", ["vendorA", "cloudB"])
def test_vendorA_format_providers_forward_every_field_and_name_none(gateway, mock, provider):
    base = mock.scenario()
    resp = chat(gateway, target(provider, base), provider, **EXTRAS)
    assert resp.status == 200 and DROPPED not in resp.headers
    assert sent(mock, base)["seed"] == 7 and sent(mock, base)["service_tier"] == "auto"


def test_the_header_is_about_the_target_that_answered_a_fallback(gateway, mock):
    down, up = mock.scenario([{"status": 503}]), mock.scenario()
    body = {"seed": 1, "user": "u-1"}  # anthropic drops seed (user is metadata.user_id); cloudC drops user
    config = {"strategy": {"mode": "fallback"}, "targets": [target("anthropic", down), target("cloudC", up)]}
    resp = chat(gateway, config, "cloudC", **body)
    assert resp.status == 200 and resp.headers["x-gateway-provider"] == "cloudC"
    assert resp.headers[DROPPED] == "user"
    down, up = mock.scenario([{"status": 503}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [target("anthropic", down), target("vendorA", up)]}
    resp = chat(gateway, config, "vendorA", **body)
    assert resp.status == 200 and resp.headers["x-gateway-provider"] == "vendorA"
    assert DROPPED not in resp.headers and mock.calls(down)["calls"] == 1


def test_a_cached_answer_names_what_its_target_dropped(gateway, mock):
    base = mock.scenario()
    config = target("anthropic", base, cache={"mode": "simple"})
    first = chat(gateway, config, "anthropic", seed=3, messages=[{"role": "user", "content": f"cache {base}"}])
    assert first.headers["x-gateway-cache-status"] == "MISS" and first.headers[DROPPED] == "seed"
    hit = None
    for _ in range(50):  # the cache write lands after the answer has gone out
        hit = chat(gateway, config, "anthropic", seed=3, messages=[{"role": "user", "content": f"cache {base}"}])
        if hit.headers["x-gateway-cache-status"] == "HIT":
            break
    assert hit is not None and hit.headers["x-gateway-cache-status"] == "HIT"
    assert hit.headers[DROPPED] == "seed" and mock.calls(base)["calls"] == 1
    status, replay_headers, events = stream_events(
        f"{gateway.url}/v1/chat/completions", {"model": MODELS["anthropic"], "stream": True, "seed": 3,
                                               "messages": [{"role": "user", "content": f"cache {base}"}]},
        headers_for(config=config))
    assert status == 200 and list(events)[-1] == b"[DONE]"
    assert replay_headers["x-gateway-cache-status"] == "HIT" and replay_headers[DROPPED] == "seed"


# --- refused: dropping would change the answer ----------------------------------------------------------------

@pytest.mark.parametrize("provider", TRANSLATED)
@pytest.mark.parametrize("fields", [{"logprobs": True}, {"logprobs": True, "top_logprobs": 3}])
def test_logprobs_true_is_a_bad_request_naming_the_field_and_provider_in_the_sdk(gateway, mock, provider, fields):
    base = mock.scenario()
    hdrs = headers_for(config=target(provider, base))
    del hdrs["content-type"]
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", default_headers=hdrs, max_retries=0, timeout=60,
                    http_client=gateway.http_client())
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODELS[provider], messages=HI, **fields)
    assert info.value.status_code == 400
    assert info.value.body["param"] == "logprobs" and provider in info.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODELS[provider], messages=HI, stream=True, **fields)
    assert mock.calls(base)["calls"] == 0


def test_anthropic_text_completions_refuse_logprobs_and_name_what_they_drop(gateway, mock):
    base = mock.scenario()
    url = f"{gateway.url}/v1/completions"
    refused = post(url, {"model": MODELS["anthropic"], "prompt": "hi", "logprobs": 0},
                   headers_for(config=target("anthropic", base)))
    assert refused.status == 400 and refused.json()["error"]["param"] == "logprobs"
    assert "anthropic" in refused.json()["error"]["message"] and mock.calls(base)["calls"] == 0
    done = post(url, {"model": MODELS["anthropic"], "prompt": "hi", "seed": 1, "n": 1},
                headers_for(config=target("anthropic", base)))
    assert done.status == 200 and done.headers[DROPPED] == "seed"


def test_cloudC_embeddings_name_what_predict_does_not_take(gateway, mock):
    base = mock.scenario()
    body = {"model": "text-embedding-005", "input": "hi", "user": "u-1", "dimensions": 8}
    resp = post(f"{gateway.url}/v1/embeddings", body, headers_for(config=target("cloudC", base)))
    assert resp.status == 200 and resp.headers[DROPPED] == "user"
    assert '"user":' not in mock.calls(base)["requests"][0]["body"]


def test_a_refusal_falls_back_to_a_target_that_can_honour_the_field(gateway, mock):
    refusing, able = mock.scenario(), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [target("anthropic", refusing), target("vendorA", able)]}
    resp = chat(gateway, config, "vendorA", logprobs=True, top_logprobs=2)
    assert resp.status == 200 and resp.headers["x-gateway-provider"] == "vendorA"
    assert DROPPED not in resp.headers
    assert mock.calls(refusing)["calls"] == 0 and sent(mock, able)["logprobs"] is True


def test_a_stream_held_for_an_output_guardrail_keeps_the_header(gateway, mock):
    base = mock.scenario([{"reply": "a calm answer"}])
    guard = {"deny": True, "default.contains": {"words": ["Hello"], "operator": "none"}}
    config = target("cloudC", base, output_guardrails=[guard])
    status, resp_headers, events = stream_events(
        f"{gateway.url}/v1/chat/completions",
        {"model": MODELS["cloudC"], "messages": HI, "stream": True, "user": "u-1"}, headers_for(config=config))
    assert status == 200 and list(events)[-1] == b"[DONE]"
    assert resp_headers["x-gateway-stream-held"] == "true" and resp_headers[DROPPED] == "user"
