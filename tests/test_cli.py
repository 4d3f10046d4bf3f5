"""The command line: ``gateway serve --help`` offers every setting that is not a secret as a flag, and a flag's
value reaches the workers."""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.settings import FIELDS
from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY, free_port, start_gateway, wait_port

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
        expected = {"compiled"} if importlib.util.find_spec("gateway._speedups.sse") else {"pure"}
        assert set(request("GET", f"{server.url}/health").json()["speedups"].values()) == expected
    finally:
        server.stop()


def _serve_with_open_files_limit(tmp_path: Path, soft: int, hard: int, *flags: str) -> tuple[subprocess.Popen, int,
                                                                                              Path]:
    """``gateway serve`` started under the given open-files limit (as a shell's ``ulimit -n`` would set it)."""
    port = free_port()
    log = tmp_path / "serve.log"
    code = ("import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard})); "
            f"sys.argv = ['gateway', 'serve', '--port', '{port}', *{list(flags)!r}]; "
            "runpy.run_module('gateway', run_name='__main__')")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GATEWAY_ADMIN_KEY": ADMIN_KEY,
           "GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_LOG_FILE": "off"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)
    wait_port(port, proc)
    return proc, port, log


def _worker_open_files_limit(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert children, "gateway serve started no worker"
    for line in Path(f"/proc/{children[0]}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-files line in /proc/<pid>/limits")


def test_serve_raises_the_open_files_limit_its_backpressure_needs(tmp_path):
    """A worker serving 1,000 streams at once needs 2 x 1,000 + 512 open files: a lower soft limit is raised (to the
    hard limit: Granian raises it that far as it loads)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2512:
        pytest.skip(f"the hard open-files limit here ({hard}) is below what the test asks for")
    proc, port, log = _serve_with_open_files_limit(tmp_path, 256, hard, "--backpressure", "1000")
    try:
        assert request("GET", f"http://127.0.0.1:{port}/health").status == 200
        assert _worker_open_files_limit(proc.pid) >= 2512
        assert "open-files limit" not in log.read_text()
    finally:
        proc.terminate()
        proc.wait(15)


def test_serve_says_when_the_open_files_limit_is_too_low_for_its_backpressure_and_still_serves(tmp_path):
    proc, port, log = _serve_with_open_files_limit(tmp_path, 1024, 1024)
    try:
        assert request("GET", f"http://127.0.0.1:{port}/health").status == 200
        text = log.read_text()
        assert ("the open-files limit (1024, hard limit 1024) lets each worker serve 256 requests or streams at once, "
                "not the 16384 asked for (GATEWAY_BACKPRESSURE)") in text
        assert "ulimit -n 33280" in text
        assert _worker_open_files_limit(proc.pid) == 1024
    finally:
        proc.terminate()
        proc.wait(15)


def test_a_worker_serving_plain_requests_never_loads_cryptography(mock):
    """cryptography (some 6 MB resident) is for sealed secrets, cloudC service accounts and jwt checks: a worker
    whose requests use none of them never maps it."""
    server = start_gateway()
    try:
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                   "x-gateway-custom-host": mock.url + "/v1", "authorization": "Bearer sk"}
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert post(f"{server.url}/v1/chat/completions", chat, headers).status == 200
        workers = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
        assert workers
        for pid in workers:
            assert "cryptography" not in Path(f"/proc/{pid}/maps").read_text()
    finally:
        server.stop()
