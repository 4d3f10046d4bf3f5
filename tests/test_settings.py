"""Settings: every GATEWAY_* variable decoded the documented way, bad values named, the docs' table generated; the
guardrail pool and state-store settings and their bounds; everything a gateway creates in its data directory is the
owner's only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.settings import FIELDS, HANDOFF_ENV, SECRETS, Settings, hand_to_workers, load, no_extensions_at_import
from tests.support.http import post
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY, start_gateway

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
    ({"GATEWAY_PUBLIC_URL": "gateway.example.com"}, {}, "GATEWAY_PUBLIC_URL"),
    ({"GATEWAY_PUBLIC_URL": "https://gw.example.com/?x=1"}, {}, "GATEWAY_PUBLIC_URL"),
    ({}, {"workers": "0"}, "--workers"),
])
def test_a_bad_value_is_refused_naming_its_variable_or_flag(env, flags, named):
    with pytest.raises(ValueError) as caught:
        load(env, flags)
    assert str(caught.value).startswith(f"{named}: ")


def test_the_kernel_switch_read_at_import_is_the_setting_a_worker_gets(monkeypatch):
    """``gateway serve --extensions`` over ``GATEWAY_NO_EXTENSIONS=1`` hands compiled to its workers; without a
    hand-over the variable decides, and a bad value of another setting does not stop an import."""
    monkeypatch.setenv(HANDOFF_ENV, "")  # none (and put back as it was after hand_to_workers below)
    monkeypatch.setenv("GATEWAY_NO_EXTENSIONS", "1")
    monkeypatch.setenv("GATEWAY_WORKERS", "0")
    assert no_extensions_at_import() is True
    monkeypatch.setenv("GATEWAY_NO_EXTENSIONS", "off")
    assert no_extensions_at_import() is False
    monkeypatch.setenv("GATEWAY_NO_EXTENSIONS", "1")
    hand_to_workers(load({"GATEWAY_NO_EXTENSIONS": "1"}, {"no_extensions": False}))
    assert no_extensions_at_import() is False
    hand_to_workers(load({}, {"no_extensions": True}))
    monkeypatch.delenv("GATEWAY_NO_EXTENSIONS")
    assert no_extensions_at_import() is True


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


def test_the_operations_doc_holds_the_settings_table_the_generator_prints():
    doc = (ROOT / "docs" / "operations.md").read_text()
    start = "<!-- settings table: generated by `python -m gateway.settings --markdown`"
    end = "<!-- end of settings table -->"
    assert start in doc and end in doc, "docs/operations.md lost the settings table's marker comments"
    table = doc.split(start, 1)[1].split("\n", 1)[1].split(end, 1)[0]
    printed = subprocess.run([sys.executable, "-m", "gateway.settings", "--markdown"], capture_output=True, text=True,
                             cwd=ROOT, timeout=60, check=True).stdout
    assert table == printed, "the settings table in docs/operations.md is stale: paste `python -m gateway.settings " \
                             "--markdown` between its markers"
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    for info in FIELDS:
        assert any(f"`{info.env}`" in row for row in rows), f"{info.env} is missing from the settings table"
    assert Settings().max_body_bytes == 33554432 and "| `33554432` (32 MiB) |" in table


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



@pytest.mark.parametrize(("env", "message"), [
    ({"GATEWAY_WORKERS": "abc"}, "GATEWAY_WORKERS: must be an integer, got 'abc'"),
    ({"GATEWAY_WORKERS": "0"}, "GATEWAY_WORKERS: must be an integer >= 1, got '0'"),
    ({"GATEWAY_STATE_FAIL_MODE": "maybe"}, "GATEWAY_STATE_FAIL_MODE: invalid enum value 'maybe'"),
])
def test_a_bad_setting_is_refused_in_the_words_a_request_field_is(env, message):
    """docs/http-api.md, Errors: the variable's name, then what is wrong in the words every 400 uses."""
    with pytest.raises(ValueError) as info:
        load(env)
    assert str(info.value) == message

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


# --- the data directory is the owner's only ----------------------------------------------------------------------


def _modes(root: Path) -> dict[str, str]:
    """Every path under ``root`` (and root itself) -> its permission bits, octal."""
    found = {".": oct(root.stat().st_mode & 0o777)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = oct(path.lstat().st_mode & 0o777)
    return found


def _not_private(root: Path) -> dict[str, str]:
    return {name: mode for name, mode in _modes(root).items()
            if mode != ("0o700" if (root / name).is_dir() else "0o600")}


def test_everything_a_gateway_creates_in_its_data_directory_is_the_owners_only(tmp_path, mock):
    data = tmp_path / "fresh" / "data"  # not there yet: the gateway creates it
    server = start_gateway(data_dir=str(data))
    try:
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk-t",
                   "x-gateway-custom-host": mock.scenario() + "/v1", "x-gateway-trace-id": "private-files"}
        chat = post(f"{server.url}/v1/chat/completions",
                    {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}, headers)
        assert chat.status == 200, chat.text
        upload = (b'--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
                  b'--zz\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n\r\n{"a": 1}\n'
                  b"\r\n--zz--\r\n")
        stored = post(f"{server.url}/v1/files", upload, {"x-gateway-api-key": ADMIN_KEY,
                                                         "content-type": "multipart/form-data; boundary=zz"})
        assert stored.status == 200, stored.text
        wait_logs(server, "private-files")
        names = set(_modes(data))
        assert {"logs.db", "logs.db-wal", "logs.db-shm", "cache.db"} <= names, sorted(names)
        assert any(name.endswith("state.db") for name in names), sorted(names)
        assert _not_private(data) == {}  # while it serves: the SQLite -wal and -shm files too
    finally:
        server.stop()
    assert _not_private(data) == {}
    assert oct((tmp_path / "fresh").stat().st_mode & 0o777) == "0o700"  # a parent it had to create as well


def test_the_keys_command_creates_a_private_data_directory_too(tmp_path):
    data = tmp_path / "keys-data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    made = subprocess.run([sys.executable, "-m", "gateway", "keys", "create", "--name", "ops"], cwd=ROOT,
                          env={**env, "GATEWAY_DATA_DIR": str(data)}, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert any(path.is_file() for path in data.rglob("*")) and _not_private(data) == {}
