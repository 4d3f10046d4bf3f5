"""The command line: ``gateway serve --help`` offers every setting that is not a secret as a flag, and a flag's
value reaches the workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gateway import _speedups
from gateway.settings import FIELDS
from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY, start_gateway

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=env)


def test_serve_help_lists_every_non_secret_setting_as_a_flag_with_its_variable_and_default():
    done = run_cli("serve", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # argparse wraps lines
    for info in FIELDS:
        if info.secret:
            assert info.flag not in text, f"the secret {info.env} must not be a flag (flags show in ps)"
            assert info.env in text  # named as environment-only
        else:
            assert info.flag in text and info.env in text, info.name
    assert "--max-body-bytes" in text and "GATEWAY_MAX_BODY_BYTES; default 33554432" in text


def test_a_bad_flag_value_stops_the_start_naming_the_flag():
    done = run_cli("serve", "--workers", "0", "--port", "1")
    assert done.returncode == 2
    assert "bad setting: --workers" in done.stderr


def test_a_malformed_redis_url_stops_the_start_and_the_keys_command_naming_the_variable(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_REDIS_URL": "redis://:pw@h:63x9/0"}
    for args in (("serve", "--port", "1"), ("keys", "list")):
        done = run_cli(*args, env=env)
        assert done.returncode == 2, done.stderr
        assert "bad setting: GATEWAY_REDIS_URL: the port must be a number" in done.stderr
        assert "Traceback" not in done.stderr


def test_flags_reach_the_workers(mock):
    server = start_gateway(flags=("--max-body-bytes", "1000", "--metrics-public"), workers=2)
    try:
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                   "x-gateway-custom-host": mock.url + "/v1", "authorization": "Bearer sk"}
        big = {"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]}
        for _ in range(4):  # whichever worker answers
            assert post(f"{server.url}/v1/chat/completions", big, headers).status == 413
            assert request("GET", f"{server.url}/metrics").status == 200
    finally:
        server.stop()


def test_on_off_flags_say_what_they_mean(mock):
    """``--no-extensions`` turns the setting of that name on (the pure twins), ``--extensions`` off; other on/off
    settings take ``--x`` and ``--no-x``."""
    server = start_gateway(flags=("--no-extensions", "--no-console"))
    try:
        assert set(request("GET", f"{server.url}/health").json()["speedups"].values()) == {"pure"}
        assert request("GET", f"{server.url}/console").status == 404
    finally:
        server.stop()
    server = start_gateway({"GATEWAY_NO_EXTENSIONS": "1", "GATEWAY_CONSOLE": "off"},
                           flags=("--extensions", "--console"))
    try:
        assert request("GET", f"{server.url}/console").status == 200
        expected = {"pure"} if _speedups.compiled("sse") is None else {"compiled"}
        assert set(request("GET", f"{server.url}/health").json()["speedups"].values()) == expected
    finally:
        server.stop()
