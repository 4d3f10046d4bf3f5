"""default.webhook against a real aiohttp service on loopback: verdicts, payload, failures, SSRF refusal."""

from __future__ import annotations

import time

import pytest

from gateway.guardrails.checks import build_check
from gateway.guardrails.webhook import CheckIO
from tests.guardrails.checks.subjects import answer, param_fault, prompt


def webhook(url: str, **params) -> object:
    return build_check("default.webhook", {"webhookURL": url, **params}, "checks")


async def test_verdict_true_passes_and_the_payload_carries_the_request(hook_server, loopback_client):
    check = webhook(f"{hook_server.url}/verdict/true", headers={"Authorization": "Bearer hook-secret"})
    subject = prompt("is this fine?", metadata={"user": "u1"})
    result = await check.run_io(subject, CheckIO(loopback_client))
    assert result.verdict is True
    assert result.explanation == "webhook says True"
    assert result.data == {"score": 0.5}
    headers, payload = hook_server.received[-1]
    assert headers["Authorization"] == "Bearer hook-secret"
    assert headers["Content-Type"] == "application/json"
    assert payload["eventType"] == "beforeRequestHook"
    assert payload["request"]["text"] == "is this fine?"
    assert payload["request"]["json"]["messages"][0]["content"] == "is this fine?"
    assert payload["metadata"] == {"user": "u1"}
    assert "response" not in payload


async def test_verdict_false_fails_and_after_hooks_send_the_answer(hook_server, loopback_client):
    result = await webhook(f"{hook_server.url}/verdict/false").run_io(answer("the answer"), CheckIO(loopback_client))
    assert result.verdict is False
    _, payload = hook_server.received[-1]
    assert payload["eventType"] == "afterRequestHook"
    assert payload["response"]["text"] == "the answer"
    assert payload["response"]["json"]["choices"][0]["message"]["content"] == "the answer"
    assert payload["request"]["text"] == "hi"


@pytest.mark.serial  # a time bound that a busy machine could break
async def test_a_webhook_that_does_not_answer_in_time_fails_within_the_timeout(hook_server, loopback_client):
    started = time.monotonic()
    result = await webhook(f"{hook_server.url}/slow", timeout=200).run_io(prompt("x"), CheckIO(loopback_client))
    assert time.monotonic() - started < 4  # the server sleeps 5 s; generous bound on a slow machine
    assert result.verdict is False
    assert "within 200 ms" in result.explanation


@pytest.mark.parametrize(
    ("path", "why"),
    [("/bad-json", "did not answer JSON"), ("/no-verdict", 'boolean "verdict"'), ("/status/500", "HTTP 500"),
     ("/status/302", "HTTP 302")],
)
async def test_bad_answers_fail_with_an_explanation(hook_server, loopback_client, path, why):
    result = await webhook(f"{hook_server.url}{path}").run_io(prompt("x"), CheckIO(loopback_client))
    assert result.verdict is False
    assert why in result.explanation


async def test_a_private_host_is_refused_without_being_contacted(hook_server, strict_client):
    result = await webhook(f"{hook_server.url}/verdict/true").run_io(prompt("x"), CheckIO(strict_client))
    assert result.verdict is False
    assert "blocked" in result.explanation and "loopback" in result.explanation
    assert hook_server.received == []


async def test_an_unreachable_webhook_fails(loopback_client):
    result = await webhook("http://127.0.0.1:9/hook", timeout=2000).run_io(prompt("x"), CheckIO(loopback_client))
    assert result.verdict is False
    assert "webhook failed" in result.explanation


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "input_guardrails[0].default.webhook.webhookURL"),
        ({"webhookURL": "file:///etc/passwd"}, "input_guardrails[0].default.webhook.webhookURL"),
        ({"webhookURL": "http://user:pw@example.com/"}, "input_guardrails[0].default.webhook.webhookURL"),
        ({"webhookURL": "https://example.com", "timeout": 0}, "input_guardrails[0].default.webhook.timeout"),
        ({"webhookURL": "https://example.com", "timeout": 120000}, "input_guardrails[0].default.webhook.timeout"),
        ({"webhookURL": "https://example.com", "headers": {"Host": "x"}},
         "input_guardrails[0].default.webhook.headers.Host"),
        ({"webhookURL": "https://example.com", "headers": {"X-A": "a\r\nX-B: b"}},
         "input_guardrails[0].default.webhook.headers.X-A"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.webhook", params) == param
