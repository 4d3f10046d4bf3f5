"""Configs through the real gateway are validated in full before any call, whichever way they were given."""

from __future__ import annotations

import msgspec
import pytest

from tests.support.http import post
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def target(base: str, **extra) -> dict:
    return {"provider": "vendorA", "api_key": "sk-t", "custom_host": base + "/v1", **extra}


def send(gateway, config: dict, **headers: str):
    all_headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
                   "content-type": "application/json", **headers}
    return post(f"{gateway.url}/v1/chat/completions", CHAT, all_headers)


def test_a_misspelled_provider_in_one_loadbalance_target_is_always_a_400(gateway, mock):
    good = mock.scenario()
    config = {"strategy": {"mode": "loadbalance"},
              "targets": [target(good), target(good, provider="opnai"), target(good)]}
    statuses = {send(gateway, config).status for _ in range(12)}
    assert statuses == {400}
    resp = send(gateway, config)
    assert resp.json()["error"]["param"] == "targets[1].provider" and "opnai" in resp.json()["error"]["message"]
    assert mock.calls(good)["calls"] == 0


@pytest.mark.parametrize("bad, param", [
    ({"provider": "vendorB"}, "targets[1].provider"),
    ({"custom_host": "ftp://models.internal/v1"}, "targets[1].custom_host"),
    ({"custom_host": "http://models.internal/v1#x"}, "targets[1].custom_host"),
    ({"custom_host": "http://user:pw@models.internal/v1"}, "targets[1].custom_host"),
])
def test_a_bad_fallback_target_is_reported_although_the_first_would_answer(gateway, mock, bad, param):
    good = mock.scenario()
    resp = send(gateway, {"strategy": {"mode": "fallback"}, "targets": [target(good), target(good, **bad)]})
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param
    assert mock.calls(good)["calls"] == 0


def test_a_header_provider_without_credentials_is_a_400_like_its_config(gateway, mock):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "groq", "content-type": "application/json"}
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT, headers)
    assert resp.status == 400
    error = resp.json()["error"]
    assert error["param"] == "authorization" and "groq" in error["message"]
    as_config = send(gateway, {"provider": "groq"})
    assert as_config.status == 400 and "api_key" in as_config.json()["error"]["message"]


def test_header_configs_name_the_header_at_fault(gateway, mock):
    headers = {"x-gateway-api-key": ADMIN_KEY, "authorization": "Bearer sk", "content-type": "application/json"}
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT, {**headers, "x-gateway-provider": "opnai"})
    assert resp.status == 400 and resp.json()["error"]["param"] == "provider"
    assert "x-gateway-provider" in resp.json()["error"]["message"] and "opnai" in resp.json()["error"]["message"]
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                {**headers, "x-gateway-provider": "vendorA", "x-gateway-custom-host": "file:///etc/passwd"})
    assert resp.status == 400 and resp.json()["error"]["param"] == "custom_host"
    assert resp.json()["error"]["message"].startswith("x-gateway-custom-host must use http or https")
    # a custom host alone is enough for a local model (no key needed)
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vllm", "x-gateway-custom-host": base + "/v1",
                 "content-type": "application/json"})
    assert resp.status == 200, resp.text


def test_a_root_provider_with_targets_and_no_strategy_runs_the_first_target(gateway, mock):
    """Targets without a strategy run as ``single``: the first target answers, inheriting the root's settings."""
    first, second = mock.scenario(), mock.scenario()
    config = {"provider": "vendorA", "api_key": "sk-root",
              "targets": [{"custom_host": first + "/v1", "override_params": {"model": "model-a"}},
                          {"custom_host": second + "/v1"}]}
    resp = send(gateway, config)
    assert resp.status == 200, resp.text
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[0]"
    (call,) = mock.calls(first)["requests"]
    assert msgspec.json.decode(call["body"])["model"] == "model-a"
    assert call["headers"]["authorization"] == "Bearer sk-root"
    assert mock.calls(second)["calls"] == 0


def test_unknown_cb_config_keys_are_ignored(gateway, mock):
    base = mock.scenario()
    config = target(base, cb_config={"failure_threshold": 3, "cooldown_interval": 30000, "half_open_max_calls": 2})
    assert send(gateway, config).status == 200
