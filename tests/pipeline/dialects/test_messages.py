"""The Messages door as a coding agent uses it (Claude Code's requests), through the real gateway with the anthropic
SDK: mid-conversation system messages translated for every provider, and an output limit above the model's
maximum cut to it and said so in ``x-gateway-max-tokens-capped``."""

from __future__ import annotations

import msgspec
import pytest

from gateway_mock.cloudA import CREDENTIALS
from gateway_mock.cloudC import TEST_TOKEN
from gateway_mock.kit import DEFAULT_REPLY
from tests.support.servers import ADMIN_KEY

anthropic = pytest.importorskip("anthropic")

BETA = "mid-conversation-system-2026-04-07"
#: a translated model of each provider and its output maximum
MODELS = {"vendorA": ("gpt-4o", 16_384), "cloudA": ("meta.llama3-70b-instruct-v1:0", 2_048),
          "cloudC": ("gemini-2.0-flash", 8_192)}
#: a conversation as Claude Code sends it: a system reminder between turns
CONVERSATION = [
    {"role": "user", "content": "Read main.py"},
    {"role": "assistant", "content": "I read it."},
    {"role": "user", "content": [{"type": "text", "text": "Now fix the bug"}]},
    {"role": "system", "content": [{"type": "text", "text": "The user switched to plan mode",
                                    "cache_control": {"type": "ephemeral"}}]},
]


def target(provider: str, base: str) -> dict:
    if provider == "vendorA":
        return {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1"}
    if provider == "cloudA":
        key = "AKIDMOCKEXAMPLE"
        return {"provider": "cloudA", "cloudA_access_key_id": key, "cloudA_secret_access_key": CREDENTIALS[key][0],
                "cloudA_region": "us-east-1", "custom_host": base}
    return {"provider": "cloudC", "api_key": TEST_TOKEN, "custom_host": base + "/v1", "cloudC_project_id": "proj-1",
            "cloudC_region": "us-central1"}


def client_for(gateway, cfg: dict):
    return anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0, timeout=60,
                               http_client=gateway.http_client("httpx2"), default_headers={
        "x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(cfg).decode()})


def sent_body(mock, base: str) -> dict:
    requests = mock.calls(base)["requests"]
    assert len(requests) == 1, requests
    body: dict = msgspec.json.decode(requests[0]["body"])
    return body


def system_texts(provider: str, body: dict) -> list[str]:
    """The system prompt as each provider received it."""
    if provider == "vendorA":
        return [m["content"] for m in body["messages"] if m["role"] == "system"]
    if provider == "cloudA":
        return [block["text"] for block in body.get("system") or ()]
    return [part["text"] for part in (body.get("systemInstruction") or {}).get("parts") or ()]


def output_limit(provider: str, body: dict) -> int:
    if provider == "vendorA":
        return int(body["max_tokens"])
    if provider == "cloudA":
        return int(body["inferenceConfig"]["maxTokens"])
    return int(body["generationConfig"]["maxOutputTokens"])


@pytest.mark.parametrize("provider", list(MODELS))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_coding_agents_request_is_answered_on_every_translated_provider(gateway, mock, provider, stream):
    """The system message among the turns is kept (in place for vendorA, which takes system messages anywhere;
    folded into the system prompt for cloudA and cloudC), and max_tokens 64000 is cut to the model's maximum."""
    model, maximum = MODELS[provider]
    base = mock.scenario([{}])
    client = client_for(gateway, target(provider, base))
    args = {"model": model, "max_tokens": 64_000, "system": "You are a coding agent", "messages": CONVERSATION,
            "betas": [BETA]}
    if stream:
        with client.beta.messages.with_streaming_response.create(stream=True, **args) as raw:
            capped = raw.headers.get("x-gateway-max-tokens-capped")
            events = [msgspec.json.decode(line[6:]) for line in raw.iter_lines() if line.startswith("data: ")]
            text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    else:
        raw = client.beta.messages.with_raw_response.create(**args)
        capped = raw.headers.get("x-gateway-max-tokens-capped")
        text = raw.parse().content[0].text
    assert text == DEFAULT_REPLY
    assert capped == f"64000->{maximum}"
    body = sent_body(mock, base)
    assert output_limit(provider, body) == maximum
    assert system_texts(provider, body) == ["You are a coding agent", "The user switched to plan mode"]
    if provider == "vendorA":  # in place: after the turn it follows
        assert body["messages"][-1] == {"role": "system", "content": "The user switched to plan mode"}
        assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user", "system"]


def test_a_limit_within_the_maximum_or_for_an_unknown_model_is_sent_as_asked(gateway, mock):
    base = mock.scenario([{}])
    client = client_for(gateway, target("vendorA", base))
    for model, asked in (("gpt-4o", 16_384), ("my-finetune", 64_000)):
        raw = client.messages.with_raw_response.create(model=model, max_tokens=asked,
                                                       messages=[{"role": "user", "content": "hi"}])
        assert raw.parse().content[0].text == DEFAULT_REPLY
        assert "x-gateway-max-tokens-capped" not in raw.headers
    assert [msgspec.json.decode(r["body"])["max_tokens"] for r in mock.calls(base)["requests"]] == [16_384, 64_000]


def test_a_system_message_cleared_at_the_next_user_turn_is_left_out_once_one_follows(gateway, mock):
    base = mock.scenario([{}])
    client = client_for(gateway, target("vendorA", base))
    client.beta.messages.create(model="gpt-4o", max_tokens=64, betas=[BETA], messages=[
        {"role": "user", "content": "one"},
        {"role": "system", "content": "only for turn one", "clear_at": "next_user_message"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "two"},
        {"role": "system", "content": "still shown", "clear_at": "next_user_message"}])
    assert system_texts("vendorA", sent_body(mock, base)) == ["still shown"]


def test_a_system_message_block_translation_cannot_carry_is_a_400_naming_it(gateway, mock):
    base = mock.scenario([{}])
    client = client_for(gateway, target("cloudA", base))
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.messages.create(model=MODELS["cloudA"][0], max_tokens=64, betas=[BETA], messages=[
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "tool_removal", "name": "bash"}]}])
    assert "messages[1].content[0].type" in caught.value.message
    assert mock.calls(base)["calls"] == 0
