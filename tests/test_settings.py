"""Settings: every GATEWAY_* variable decoded the documented way, bad values named, the README lists them all; the
guardrail pool and state-store settings and their bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import FIELDS, SECRETS, Settings, load

ROOT = Path(__file__).resolve().parents[1]


def test_numbers_lists_and_text_come_from_their_variables():
    settings = load({"GATEWAY_PORT": "9000", "GATEWAY_POOL_KEEPALIVE_S": "2.5", "GATEWAY_LOG_LEVEL": "debug",
                     "GATEWAY_ALLOW_PRIVATE_HOSTS": " 127.0.0.1, localhost,,", "ORGANISATION_HEADERS_TO_MASK": "x-a"})
    assert settings.port == 9000 and settings.pool_keepalive_s == 2.5 and settings.log_level == "debug"
    assert settings.allow_private_hosts == ("127.0.0.1", "localhost")
    assert settings.organisation_headers_to_mask == ("x-a",)


@pytest.mark.parametrize(("text", "expected"), [
    ("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False), ("false", False), ("nope", False),
])
def test_booleans_read_1_true_yes_on_as_true_and_anything_else_as_false(text, expected):
    assert load({"GATEWAY_LOG_BODIES": text}).log_bodies is expected


def test_an_empty_variable_is_unset_and_request_timeout_is_also_read_from_its_spec_name():
    assert load({"GATEWAY_PORT": "", "GATEWAY_REQUEST_TIMEOUT_MS": ""}) == load({})
    assert load({"REQUEST_TIMEOUT": "5000"}).request_timeout_ms == 5000
    assert load({"REQUEST_TIMEOUT": "5000", "GATEWAY_REQUEST_TIMEOUT_MS": "7000"}).request_timeout_ms == 7000


def test_flags_win_over_the_environment():
    settings = load({"GATEWAY_PORT": "9000", "GATEWAY_LOG_BODIES": "1"}, {"port": "9100", "log_bodies": False})
    assert settings.port == 9100 and settings.log_bodies is False


@pytest.mark.parametrize(("env", "flags", "named"), [
    ({"GATEWAY_PORT": "eighty"}, {}, "GATEWAY_PORT"),
    ({"GATEWAY_WORKERS": "0"}, {}, "GATEWAY_WORKERS"),
    ({"GATEWAY_MAX_BODY_BYTES": "-1"}, {}, "GATEWAY_MAX_BODY_BYTES"),
    ({"GATEWAY_LOG_RETENTION_ROWS": "0"}, {}, "GATEWAY_LOG_RETENTION_ROWS"),
    ({}, {"workers": "0"}, "--workers"),
])
def test_a_bad_value_is_refused_naming_its_variable_or_flag(env, flags, named):
    with pytest.raises(ValueError) as caught:
        load(env, flags)
    assert str(caught.value).startswith(f"{named}: ")


def test_secrets_are_marked_and_the_admin_key_and_redis_url_are_among_them():
    assert {"admin_key", "redis_url"} <= SECRETS
    assert load({"GATEWAY_ADMIN_KEY": "k", "GATEWAY_REDIS_URL": "redis://:pw@h/0"}).redis_url == "redis://:pw@h/0"


@pytest.mark.parametrize(("url", "why"), [
    ("localhost:6379", "must start with redis://"),
    ("http://:hunter2@h:6379/0", "must start with redis://"),
    ("redis://:hunter2@h:63x9/0", "the port must be a number"),
    ("redis://:hunter2@h:6379/zero", "the database after the host must be a number"),
    ("redis://:hunter2@:6379/0", "needs a host"),
    ("redis+cluster://:hunter2@h1:7000,:7001", "a node needs host:port"),
    ("unix://", "needs the socket's path"),
])
def test_a_redis_url_that_cannot_work_is_refused_without_repeating_its_password(url, why):
    with pytest.raises(ValueError) as caught:
        load({"GATEWAY_REDIS_URL": url})
    assert str(caught.value).startswith("GATEWAY_REDIS_URL: ") and why in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize("url", ["redis://h", "rediss://u:p@h:6380/2", "unix:///run/redis.sock",
                                 "redis+cluster://h1:7000,h2:7001", "rediss+cluster://u:p@h1:7000"])
def test_every_documented_redis_url_form_is_accepted(url):
    assert load({"GATEWAY_REDIS_URL": url}).redis_url == url


def test_the_readme_documents_every_setting_with_its_default():
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")]
    for info in FIELDS:
        assert any(f"`{info.env}`" in row for row in rows), f"{info.env} is missing from the README settings table"
    readme = "\n".join(rows)
    assert Settings().max_body_bytes == 33554432 and "| `33554432`" in readme


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
