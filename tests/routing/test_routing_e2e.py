"""Routing through the real gateway: fallback, loadbalance, conditional, retries, timeouts, params, headers."""

from __future__ import annotations

import time

import msgspec
import pytest

from tests.support.http import post
from tests.support.servers import ADMIN_KEY, free_port

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def target(base: str, **extra) -> dict:
    return {"provider": "vendorA", "api_key": "sk-t", "custom_host": base + "/v1", **extra}


def send(gateway, config: dict, body: dict | None = None, **headers: str):
    all_headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
                   "content-type": "application/json", **headers}
    return post(f"{gateway.url}/v1/chat/completions", body or CHAT, all_headers)


def test_fallback_moves_on_after_a_failure_and_says_which_target_answered(gateway, mock):
    bad, good = mock.scenario([{"status": 503}]), mock.scenario()
    resp = send(gateway, {"strategy": {"mode": "fallback"}, "targets": [target(bad), target(good)]})
    assert resp.status == 200
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert mock.calls(bad)["calls"] == 1 and mock.calls(good)["calls"] == 1


def test_fallback_only_on_listed_status_codes(gateway, mock):
    bad, good = mock.scenario([{"status": 503, "message": "down"}]), mock.scenario()
    config = {"strategy": {"mode": "fallback", "on_status_codes": [429]}, "targets": [target(bad), target(good)]}
    resp = send(gateway, config)
    assert resp.status == 503 and resp.json()["error"]["message"] == "down"
    assert mock.calls(good)["calls"] == 0
    limited = mock.scenario([{"status": 429}])
    assert send(gateway, {**config, "targets": [target(limited), target(good)]}).status == 200


def test_a_targets_own_on_status_codes_decide_its_fallback(gateway, mock):
    bad, good = mock.scenario([{"status": 500}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [target(bad, on_status_codes=[502]), target(good)]}
    assert send(gateway, config).status == 500


@pytest.mark.serial  # a time bound that a busy machine could break
def test_fallback_on_timeout_and_on_connection_failure(gateway, mock):
    slow, good = mock.scenario([{"delay_ms": 3000}]), mock.scenario()
    dead = f"http://127.0.0.1:{free_port()}"
    config = {"strategy": {"mode": "fallback", "on_status_codes": [429]},
              "targets": [target(slow, request_timeout=300), target(dead), target(good)]}
    started = time.monotonic()
    resp = send(gateway, config)
    assert resp.status == 200
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[2]"
    assert time.monotonic() - started < 2.5


def test_when_every_target_fails_the_last_targets_error_is_returned_and_flagged(gateway, mock):
    first = mock.scenario([{"status": 500, "message": "first broke"}])
    last = mock.scenario([{"status": 503, "message": "last broke"}])
    resp = send(gateway, {"strategy": {"mode": "fallback"}, "targets": [target(first), target(last)]})
    assert resp.status == 503
    assert resp.json()["error"]["message"] == "last broke"
    assert resp.headers["x-gateway-fallback-exhausted"] == "true"
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"


def test_nested_targets_report_their_full_path(gateway, mock):
    bad, good = mock.scenario([{"status": 502}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [
        {"strategy": {"mode": "fallback"}, "targets": [target(bad), target(good)]},
        target(bad),
    ]}
    resp = send(gateway, config)
    assert resp.status == 200
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[0].targets[1]"


def test_loadbalance_follows_weights_and_never_picks_weight_zero(gateway, mock):
    a, b, never = mock.scenario(), mock.scenario(), mock.scenario()
    config = {"strategy": {"mode": "loadbalance"},
              "targets": [target(a, weight=3), target(b, weight=1), target(never, weight=0)]}
    for _ in range(300):
        assert send(gateway, config).status == 200
    share_a = mock.calls(a)["calls"] / 300
    assert 0.65 <= share_a <= 0.85
    assert mock.calls(never)["calls"] == 0


def test_conditional_routes_by_metadata_and_params(gateway, mock):
    big, small, other = mock.scenario(), mock.scenario(), mock.scenario()
    config = {
        "strategy": {"mode": "conditional", "default": "small", "conditions": [
            {"query": {"metadata.user_plan": {"$eq": "paid"}}, "then": "big"},
            {"query": {"$or": [{"params.model": "special"}, {"params.temperature": {"$gt": 1.5}}]}, "then": "other"},
        ]},
        "targets": [target(big, name="big"), target(small, name="small"), target(other, name="other")],
    }
    assert send(gateway, config, **{"x-gateway-metadata": '{"user_plan": "paid"}'}).headers[
        "x-gateway-last-used-option-index"] == "config.targets[0]"
    assert send(gateway, config, {**CHAT, "temperature": 1.9}).headers[
        "x-gateway-last-used-option-index"] == "config.targets[2]"
    assert send(gateway, config, {**CHAT, "model": "special"}).status == 200
    assert send(gateway, config).headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert mock.calls(big)["calls"] == 1 and mock.calls(other)["calls"] == 2 and mock.calls(small)["calls"] == 1


def test_retries_until_success_and_reports_the_count(gateway, mock):
    flaky = mock.scenario([{"status": 503, "times": 2}, {}])
    resp = send(gateway, target(flaky, retry={"attempts": 3}))
    assert resp.status == 200
    assert resp.headers["x-gateway-retry-attempt-count"] == "2"
    assert mock.calls(flaky)["calls"] == 3


def test_no_retry_on_codes_outside_the_list(gateway, mock):
    bad = mock.scenario([{"status": 400}])
    resp = send(gateway, target(bad, retry={"attempts": 3}))
    assert resp.status == 400
    assert mock.calls(bad)["calls"] == 1
    custom = mock.scenario([{"status": 418, "times": 1}, {}])
    assert send(gateway, target(custom, retry={"attempts": 1, "on_status_codes": [418]})).status == 200


def test_retries_give_up_after_attempts(gateway, mock):
    down = mock.scenario([{"status": 500}])
    resp = send(gateway, target(down, retry={"attempts": 2}))
    assert resp.status == 500
    assert resp.headers["x-gateway-retry-attempt-count"] == "2"
    assert mock.calls(down)["calls"] == 3


@pytest.mark.serial  # a time bound that a busy machine could break
def test_retry_after_headers_are_honoured_when_asked(gateway, mock):
    limited = mock.scenario([{"status": 429, "retry_after_ms": "900"}, {}])
    started = time.monotonic()
    resp = send(gateway, target(limited, retry={"attempts": 1, "use_retry_after_headers": True}))
    assert resp.status == 200
    assert time.monotonic() - started >= 0.85
    limited_s = mock.scenario([{"status": 429, "retry_after": "1"}, {}])
    started = time.monotonic()
    assert send(gateway, target(limited_s, retry={"attempts": 1, "use_retry_after_headers": True})).status == 200
    assert time.monotonic() - started >= 0.95


@pytest.mark.serial  # a time bound that a busy machine could break
def test_retry_after_longer_than_the_bound_gives_up_at_once_so_fallback_takes_over(gateway, mock):
    limited, good = mock.scenario([{"status": 429, "retry_after": "3600"}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"},
              "targets": [target(limited, retry={"attempts": 2, "use_retry_after_headers": True}), target(good)]}
    started = time.monotonic()
    assert send(gateway, config).status == 200
    assert time.monotonic() - started < 2
    assert mock.calls(limited)["calls"] == 1


@pytest.mark.serial  # a time bound that a busy machine could break
def test_config_request_timeout_answers_408_promptly(gateway, mock):
    slow = mock.scenario([{"delay_ms": 3000}])
    started = time.monotonic()
    resp = send(gateway, target(slow, request_timeout=250))
    assert resp.status == 408
    assert resp.json()["error"]["type"] == "timeout_error"
    assert time.monotonic() - started < 2


def test_breaker_skips_a_failing_target_once_it_opens(gateway, mock):
    bad, good = mock.scenario([{"status": 503}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [
        target(bad, cb_config={"failure_threshold": 2, "cooldown_interval": 60000}), target(good)]}
    for _ in range(5):
        assert send(gateway, config).status == 200
    assert mock.calls(bad)["calls"] == 2
    assert mock.calls(good)["calls"] == 5


def test_params_are_overridden_then_defaulted_then_dropped(gateway, mock):
    base = mock.scenario()
    config = target(base, override_params={"model": "forced", "temperature": 0.1},
                    default_params={"max_tokens": 77, "temperature": 1.5, "user": "dflt"},
                    drop_params=["user", "response_format.json_schema.strict", "messages.0.name"])
    response_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"},
                                                              "strict": True}}
    body = {**CHAT, "temperature": 0.9, "response_format": response_format,
            "messages": [{"role": "user", "content": "hi", "name": "n"}]}
    assert send(gateway, config, body).status == 200
    sent = msgspec.json.decode(mock.calls(base)["requests"][0]["body"])
    assert sent["model"] == "forced" and sent["temperature"] == 0.1 and sent["max_tokens"] == 77
    assert "user" not in sent
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "x", "schema": {"type": "object"}}}
    assert sent["messages"][0] == {"role": "user", "content": "hi"}


def test_targets_inherit_parent_settings(gateway, mock):
    bad, good = mock.scenario([{"status": 503}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "api_key": "sk-parent", "override_params": {"model": "inherited"},
              "targets": [{"provider": "vendorA", "custom_host": bad + "/v1"},
                          {"provider": "vendorA", "custom_host": good + "/v1"}]}
    assert send(gateway, config).status == 200
    sent = mock.calls(good)["requests"][0]
    assert sent["headers"]["authorization"] == "Bearer sk-parent"
    assert msgspec.json.decode(sent["body"])["model"] == "inherited"


def test_config_forward_headers_behave_like_the_header(gateway, mock):
    base = mock.scenario()
    assert send(gateway, target(base, forward_headers=["x-tenant"]), **{"x-tenant": "acme"}).status == 200
    assert mock.calls(base)["requests"][0]["headers"]["x-tenant"] == "acme"


def test_streams_fall_back_when_the_first_event_is_an_error(gateway, mock):
    bad, good = mock.scenario([{"stream_error": "first"}]), mock.scenario()
    resp = send(gateway, {"strategy": {"mode": "fallback"}, "targets": [target(bad), target(good)]},
                {**CHAT, "stream": True})
    assert resp.status == 200
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert resp.body.rstrip().endswith(b"data: [DONE]")


@pytest.mark.parametrize(
    "config, param",
    [
        ({"strategy": {"mode": "fallback"}, "targets": [
            {"provider": "vendorA", "api_key": "k"},
            {"provider": "vendorA", "api_key": "k", "cb_config": {"failure_threshold": 1, "cooldown_interval": 1000}}]},
         "targets[1].cb_config.cooldown_interval"),
        ({"provider": "vendorA", "api_key": "k", "retry": {"attempts": "three"}}, "retry.attempts"),
        ({"provider": "vendorA", "api_key": "k", "surprise": 1}, "surprise"),
        ({"strategy": {"mode": "conditional", "conditions": [{"query": {"metadata.x": 1}, "then": "nobody"}],
                       "default": "a"}, "targets": [{"provider": "vendorA", "api_key": "k", "name": "a"}]},
         "strategy.conditions[0].then"),
    ],
)
def test_bad_configs_are_400_naming_the_json_path_before_any_upstream_call(gateway, config, param):
    resp = send(gateway, config)
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param
    assert param in error["message"]


def test_fallback_exhausted_is_said_once_when_the_last_target_is_itself_a_fallback(gateway, mock):
    bad = [mock.scenario([{"status": 503}]) for _ in range(3)]
    inner = {"strategy": {"mode": "fallback"}, "targets": [target(bad[1]), target(bad[2])]}
    resp = send(gateway, {"strategy": {"mode": "fallback"}, "targets": [target(bad[0]), inner]})
    assert resp.status == 503
    assert resp.all("x-gateway-fallback-exhausted") == ["true"]


def test_a_request_timeout_names_the_provider_not_gateway_internals(gateway, mock):
    slow = mock.scenario([{"delay_ms": 2000}])
    resp = send(gateway, target(slow, request_timeout=200))
    assert resp.status == 408
    message = resp.json()["error"]["message"]
    assert "200 ms" in message and "vendorA" in message and "config" not in message
    resp = send(gateway, {"strategy": {"mode": "fallback"}, "targets": [target(slow, request_timeout=200)]})
    assert resp.status == 408 and "targets[0]" in resp.json()["error"]["message"]
