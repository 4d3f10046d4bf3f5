"""Hooks and guardrails in the request path, through the real gateway and the openai SDK: deny (446), failed
without deny (246), passing (200 with hook_results), streams (hook_results in the first chunk, held streams for
output checks that deny), async items, webhooks that time out, redaction, and what a deny never triggers."""

from __future__ import annotations

import json
import time
from importlib.metadata import version

import openai
import pytest

from tests.support.headers import headers_for
from tests.support.http import post, stream_events
from tests.support.poll import wait_logs
from tests.support.webhook import WebhookServer

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "tell me about gateways"}]}
AT_MOST_3_WORDS = {"default.wordCount": {"minWords": 1, "maxWords": 3}}
NO_HELLO = {"default.contains": {"words": ["Hello"], "operator": "none"}}


def config(base: str, **extra) -> dict:
    return {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1", **extra}


def chat(url: str, cfg: dict, body: dict = CHAT):
    return post(url + "/v1/chat/completions", body, headers_for(config=cfg))


def stream(url: str, cfg: dict, body: dict = CHAT) -> tuple[int, dict, list[dict]]:
    status, resp_headers, events = stream_events(url + "/v1/chat/completions", {**body, "stream": True},
                                                 headers_for(config=cfg))
    payloads = list(events)
    if resp_headers["content-type"].startswith("application/json"):
        return status, resp_headers, []
    assert payloads[-1] == b"[DONE]"
    return status, resp_headers, [json.loads(p) for p in payloads[:-1]]


@pytest.fixture(scope="module")
def webhook():
    server = WebhookServer().start()
    yield server
    server.stop()


def test_an_input_deny_is_446_with_hook_results_and_no_upstream_call(gateway, mock, openai_client):
    base = mock.scenario()
    cfg = config(base, input_guardrails=[{"id": "short", "deny": True, **AT_MOST_3_WORDS}])
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(**CHAT)
    assert info.value.status_code == 446
    doc = info.value.response.json()
    assert doc["error"]["type"] == "hooks_failed" and doc["error"]["code"] == "guardrail_denied"
    hook = doc["hook_results"]["before_request_hooks"][0]
    assert hook["id"] == "short" and hook["verdict"] is False and hook["deny"] is True
    assert hook["checks"][0]["id"] == "default.wordCount" and hook["checks"][0]["verdict"] is False
    assert doc["hook_results"]["after_request_hooks"] == []
    assert mock.calls(base)["calls"] == 0


def test_a_failure_without_deny_is_246_and_the_sdk_reads_the_answer(gateway, mock, openai_client):
    base = mock.scenario()
    cfg = config(base, input_guardrails=[AT_MOST_3_WORDS], output_guardrails=[NO_HELLO])
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    raw = client.chat.completions.with_raw_response.create(**CHAT)
    assert raw.status_code == 246
    completion = raw.parse()
    assert completion.choices[0].message.content.startswith("Hello")
    results = completion.model_extra["hook_results"]
    assert [h["verdict"] for h in results["before_request_hooks"]] == [False]
    assert [h["verdict"] for h in results["after_request_hooks"]] == [False]
    assert mock.calls(base)["calls"] == 1


def test_all_passing_is_200_with_hook_results(gateway, mock):
    base = mock.scenario([{"reply": "short and sweet"}])
    cfg = config(base, before_request_hooks=[{"id": "hook-1", "checks": [
        {"id": "default.characterCount", "parameters": {"minCharacters": 1}}]}],
        output_guardrails=[NO_HELLO])
    resp = chat(gateway.url, cfg)
    assert resp.status == 200
    results = resp.json()["hook_results"]
    assert results["before_request_hooks"][0]["id"] == "hook-1" and results["before_request_hooks"][0]["verdict"]
    assert results["after_request_hooks"][0]["verdict"] is True
    plain = chat(gateway.url, config(base))
    assert plain.status == 200 and "hook_results" not in plain.json()


@pytest.mark.parametrize(("check", "text", "passes"), [
    ({"default.regexMatch": {"rule": r"\bgateways?\b"}}, "about gateways", True),
    ({"default.regexMatch": {"rule": r"^\d+$"}}, "about gateways", False),
    ({"default.contains": {"words": ["gateway"], "operator": "all"}}, "about gateways", True),
    ({"default.contains": {"words": ["gateway", "llama"], "operator": "all"}}, "about gateways", False),
    ({"default.wordCount": {"minWords": 2, "maxWords": 3}}, "about gateways", True),
    ({"default.characterCount": {"maxCharacters": 5}}, "about gateways", False),
    ({"default.jsonSchema": {"schema": {"type": "object", "required": ["a"]}}}, '{"a": 1}', True),
    ({"default.jsonKeys": {"keys": ["b"], "operator": "all"}}, '{"a": 1}', False),
    ({"default.validUrls": {}}, "see https://example.com/x", True),
    ({"default.containsCode": {"format": "python"}}, "no code here", False),
    ({"default.alllowercase": {}}, "about gateways", True),
    ({"default.alluppercase": {}}, "about gateways", False),
    ({"default.endsWith": {"suffix": "gateways"}}, "about gateways", True),
    ({"default.modelWhitelist": {"models": ["gpt-4o-mini"]}}, "about gateways", True),
    ({"default.modelWhitelist": {"models": ["other"]}}, "about gateways", False),
    ({"default.requiredMetadataKeys": {"metadataKeys": ["team"]}}, "about gateways", False),
    ({"default.allowedRequestTypes": {"allowedTypes": ["chat"]}}, "about gateways", True),
    ({"default.allowedRequestTypes": {"blockedTypes": ["chat"]}}, "about gateways", False),
    ({"default.pii": {}}, "mail me at someone@example.com", False),
    ({"default.sentenceCount": {"maxSentences": 1}}, "One. Two. Three.", False),
    ({"default.jwt": {"secret": "s3cret-for-tests-0123456789abcdef"}}, "about gateways", False),
])
def test_every_built_in_check_passes_and_fails_end_to_end(gateway, mock, check, text, passes):
    base = mock.scenario()
    cfg = config(base, input_guardrails=[{"deny": True, **check}])
    resp = chat(gateway.url, cfg, {**CHAT, "messages": [{"role": "user", "content": text}]})
    assert resp.status == (200 if passes else 446), resp.text
    assert resp.json()["hook_results"]["before_request_hooks"][0]["verdict"] is passes
    assert mock.calls(base)["calls"] == (1 if passes else 0)


@pytest.mark.serial  # a time bound that a busy machine could break
def test_webhook_checks_pass_fail_and_time_out(gateway, mock, webhook):
    base = mock.scenario()
    for path, status in (("/verdict/true", 200), ("/verdict/false", 446), ("/status/500", 446)):
        cfg = config(base, input_guardrails=[{"deny": True, "default.webhook": {"webhookURL": webhook.url + path}}])
        assert chat(gateway.url, cfg).status == status, path
    cfg = config(base, input_guardrails=[{"deny": True, "default.webhook": {"webhookURL": webhook.url + "/slow/3000",
                                                                            "timeout": 300}}])
    started = time.monotonic()
    resp = chat(gateway.url, cfg)
    assert time.monotonic() - started < 2.5
    check = resp.json()["hook_results"]["before_request_hooks"][0]["checks"][0]
    assert resp.status == 446 and check["verdict"] is False and "300 ms" in check["explanation"]
    sent = [body for path, body in webhook.received if path == "/verdict/true"][-1]
    assert sent["eventType"] == "beforeRequestHook" and sent["request"]["text"] == CHAT["messages"][0]["content"]
    assert set(webhook.user_agents) == {f"gateway/{version('gateway')}"}  # the gateway's name, not aiohttp's
    assert mock.calls(base)["requests"][-1]["headers"]["user-agent"] == f"gateway/{version('gateway')}"


def test_an_output_deny_is_446_after_the_upstream_answered(gateway, mock):
    base = mock.scenario()
    cfg = config(base, output_guardrails=[{"deny": True, **NO_HELLO}])
    resp = chat(gateway.url, cfg)
    assert resp.status == 446 and resp.json()["hook_results"]["after_request_hooks"][0]["deny"] is True
    assert mock.calls(base)["calls"] == 1


def test_a_stream_carries_hook_results_in_its_first_chunk(gateway, mock, openai_client):
    base = mock.scenario()
    cfg = config(base, input_guardrails=[AT_MOST_3_WORDS])
    status, resp_headers, events = stream(gateway.url, cfg)
    assert status == 246 and "x-gateway-stream-held" not in resp_headers
    assert events[0]["hook_results"]["before_request_hooks"][0]["verdict"] is False
    assert all("hook_results" not in e for e in events[1:])
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    chunks = list(client.chat.completions.create(**CHAT, stream=True))
    assert chunks[0].model_extra["hook_results"]["before_request_hooks"][0]["id"] == "input_guardrails[0]"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("Hello")


def test_an_output_check_with_deny_holds_the_stream(gateway, mock):
    denied = mock.scenario()
    status, resp_headers, events = stream(gateway.url, config(denied, output_guardrails=[{"deny": True, **NO_HELLO}]))
    assert status == 446 and resp_headers["x-gateway-stream-held"] == "true" and events == []
    passing = mock.scenario([{"reply": "a calm answer"}])
    cfg = config(passing, output_guardrails=[{"deny": True, **NO_HELLO}])
    status, resp_headers, events = stream(gateway.url, cfg)
    assert status == 200 and resp_headers["x-gateway-stream-held"] == "true"
    assert events[0]["hook_results"]["after_request_hooks"][0]["verdict"] is True
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"]) == "a calm answer"


def test_an_output_check_without_deny_lets_the_stream_flow_and_logs_its_verdict(gateway, mock):
    base = mock.scenario()
    status, resp_headers, events = stream_events(gateway.url + "/v1/chat/completions", {**CHAT, "stream": True},
                                                 headers_for(config=config(base, output_guardrails=[NO_HELLO])))
    list(events)
    assert status == 200 and "x-gateway-stream-held" not in resp_headers
    line = wait_logs(gateway, resp_headers["x-gateway-trace-id"], timeout=15)[0]
    after = line["hook_results"]["after_request_hooks"][0]
    assert after["verdict"] is False and after["checks"][0]["id"] == "default.contains"


def test_a_redacting_input_check_sends_the_redacted_text_upstream(gateway, mock):
    base = mock.scenario()
    body = {**CHAT, "messages": [{"role": "user", "content": "write to jane.doe@example.com please"}]}
    resp = chat(gateway.url, config(base, input_guardrails=[{"default.pii": {"redact": True}}]), body)
    assert resp.status == 200
    assert resp.json()["hook_results"]["before_request_hooks"][0]["transformed"] is True
    sent = mock.calls(base)["requests"][0]["body"]
    assert "jane.doe@example.com" not in sent and "[EMAIL]" in sent


@pytest.mark.serial  # a time bound that a busy machine could break
def test_async_items_never_delay_the_answer_and_go_to_the_log(gateway, mock, webhook, openai_client):
    base = mock.scenario()
    slow = {"default.webhook": {"webhookURL": webhook.url + "/slow/3000", "timeout": 10000}}
    cfg = config(base, input_guardrails=[{"id": "audit", "async": True, **slow}],
                 after_request_hooks=[{"id": "after-audit", "async": True, "checks": [
                     {"id": "default.webhook", "parameters": slow["default.webhook"]}],
                     "on_success": {"feedback": {"value": 1, "weight": 0.5}}}])
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    started = time.monotonic()
    raw = client.chat.completions.with_raw_response.create(**CHAT)
    assert time.monotonic() - started < 2.5  # the hooks take 3 s each
    assert raw.status_code == 200 and "hook_results" not in (raw.parse().model_extra or {})
    line = wait_logs(gateway, raw.headers["x-gateway-trace-id"], timeout=15,
                     want=lambda items: "hook_results" in items[0])[0]
    results = line["hook_results"]
    assert results["before_request_hooks"][0]["id"] == "audit" and results["before_request_hooks"][0]["async"]
    assert results["after_request_hooks"][0]["verdict"] is True
    assert results["feedback"] == [{"hook_id": "after-audit", "verdict": True, "value": 1, "weight": 0.5,
                                    "metadata": None}]


def test_feedback_of_the_outcome_that_happened_is_logged(gateway, mock):
    base = mock.scenario()
    cfg = config(base, input_guardrails=[{**AT_MOST_3_WORDS, "on_fail": {"feedback": {"value": -1, "metadata": {
        "why": "too long"}}}, "on_success": {"feedback": {"value": 1}}}])
    resp = chat(gateway.url, cfg)
    assert resp.status == 246
    line = wait_logs(gateway, resp.headers["x-gateway-trace-id"], timeout=15)[0]
    assert line["hook_results"]["feedback"][0]["value"] == -1
    assert line["hook_results"]["feedback"][0]["metadata"] == {"why": "too long"}


def test_a_deny_is_never_retried_or_fallen_back_from(gateway, mock):
    first, second = mock.scenario(), mock.scenario()
    cfg = {"strategy": {"mode": "fallback"}, "retry": {"attempts": 2, "on_status_codes": [446]},
           "output_guardrails": [{"deny": True, **NO_HELLO}],
           "targets": [config(first), config(second)]}
    resp = chat(gateway.url, cfg)
    assert resp.status == 446 and "x-gateway-fallback-exhausted" not in resp.headers
    assert (mock.calls(first)["calls"], mock.calls(second)["calls"]) == (1, 0)


def test_input_checks_run_before_the_cache_and_output_checks_on_cached_answers(gateway, mock):
    base = mock.scenario()
    cached = config(base, cache={"mode": "simple"})
    assert chat(gateway.url, cached).status == 200
    denied = chat(gateway.url, {**cached, "input_guardrails": [{"deny": True, **AT_MOST_3_WORDS}]})
    assert denied.status == 446 and denied.headers["x-gateway-cache-status"] == "DISABLED"
    checked = chat(gateway.url, {**cached, "output_guardrails": [{"deny": True, **NO_HELLO}]})
    assert checked.status == 446 and checked.headers["x-gateway-cache-status"] == "HIT"
    assert mock.calls(base)["calls"] == 1
