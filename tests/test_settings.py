"""Settings read from GATEWAY_* variables: the guardrail pool and state-store settings and their bounds."""

from __future__ import annotations

import pytest

from gateway.settings import load


def test_guardrail_settings_are_read_with_defaults():
    defaults = load({})
    assert (defaults.guardrail_workers, defaults.guardrail_queue, defaults.guardrail_async_max) == (2, 64, 256)
    chosen = load({"GATEWAY_GUARDRAIL_WORKERS": "4", "GATEWAY_GUARDRAIL_QUEUE": "8",
                   "GATEWAY_GUARDRAIL_ASYNC_MAX": "16"})
    assert (chosen.guardrail_workers, chosen.guardrail_queue, chosen.guardrail_async_max) == (4, 8, 16)


@pytest.mark.parametrize("var", ["GATEWAY_GUARDRAIL_WORKERS", "GATEWAY_GUARDRAIL_QUEUE", "GATEWAY_GUARDRAIL_ASYNC_MAX"])
def test_guardrail_settings_below_one_are_refused(var):
    with pytest.raises(ValueError) as info:
        load({var: "0"})
    assert var in str(info.value)


def test_state_settings_are_read_with_defaults():
    defaults = load({})
    assert (defaults.redis_url, defaults.redis_key_prefix, defaults.state_fail_mode) == (None, "gw:", "open")
    assert (defaults.state_timeout_ms, defaults.state_watch_interval_ms) == (500, 250)
    chosen = load({"GATEWAY_REDIS_URL": "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
                   "GATEWAY_STATE_FAIL_MODE": "closed", "GATEWAY_STATE_CACHE_MAX_ENTRIES": "5"})
    assert chosen.redis_url.startswith("redis+cluster://") and chosen.state_fail_mode == "closed"
    assert chosen.state_cache_max_entries == 5


@pytest.mark.parametrize("env, var", [
    ({"GATEWAY_STATE_FAIL_MODE": "maybe"}, "GATEWAY_STATE_FAIL_MODE"),
    ({"GATEWAY_STATE_TIMEOUT_MS": "0"}, "GATEWAY_STATE_TIMEOUT_MS"),
    ({"GATEWAY_STATE_CACHE_MAX_BYTES": "0"}, "GATEWAY_STATE_CACHE_MAX_BYTES"),
    ({"GATEWAY_REDIS_KEY_PREFIX": "{gw}:"}, "GATEWAY_REDIS_KEY_PREFIX"),
])
def test_bad_state_settings_are_refused_naming_the_variable(env, var):
    with pytest.raises(ValueError) as info:
        load(env)
    assert var in str(info.value)
