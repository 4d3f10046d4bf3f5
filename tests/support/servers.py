"""Start the real gateway (``gateway serve``) and the mock upstream (``gateway mock-upstream``) as subprocesses."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from tests.support.http import request

ADMIN_KEY = "test-admin-key"
#: a proxy of the machine running the tests never applies to the servers they start (a test sets its own)
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout}s")


class Server:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path, env: dict[str, str]) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.env = env

    def stop(self, sig_timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after ``sig_timeout``; then whatever is left of its process group (a worker whose
        main process was killed) is killed too, so no test leaves a server behind."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(sig_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def http_client(self, package: str = "httpx", **options: Any) -> Any:
        """A plain ``Client`` of ``package`` (an SDK's ``http_client=``): the in-process gateway's method of that
        name, so a helper that builds an SDK client takes either kind of gateway."""
        return importlib.import_module(package).Client(**options)


def start(args: list[str], env_extra: dict[str, str] | None = None, port: int | None = None,
          ready_path: str | None = "/health") -> Server:
    port = port or free_port()
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("GATEWAY_") or k == "GATEWAY_NO_EXTENSIONS") and k.lower() not in _PROXY_VARIABLES}
    env.update(env_extra or {})
    log = Path(tempfile.mkstemp(prefix="gw-test-", suffix=".log")[1])
    cmd = [sys.executable, "-m", "gateway", *args, "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            cwd=str(Path(__file__).resolve().parents[2]), start_new_session=True)
    server = Server(proc, port, log, env)
    try:
        wait_port(port, proc)
        if ready_path:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if request("GET", server.url + ready_path).status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.05)
    except Exception:  # noqa: BLE001 - any start failure: stop the process, report its output
        server.stop()
        raise RuntimeError(f"could not start {cmd}:\n{server.output()}") from None
    return server


def start_mock(workers: int = 1) -> Server:
    return start(["mock-upstream", "--workers", str(workers)], ready_path=None)


def start_gateway(env: dict[str, str] | None = None, data_dir: str | None = None, workers: int = 1,
                  flags: tuple[str, ...] = ()) -> Server:
    settings = {
        "GATEWAY_ADMIN_KEY": ADMIN_KEY,
        "GATEWAY_DATA_DIR": data_dir or tempfile.mkdtemp(prefix="gw-data-"),
        "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1,localhost,::1",
        "GATEWAY_WORKERS": str(workers),
    }
    settings.update(env or {})
    return start(["serve", *flags], settings)


class Mock:
    """Helpers over a running mock upstream: scripted scenarios and what they received."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.url = server.url
        self._n = 0

    def scenario(self, steps: list[dict] | None = None, name: str | None = None) -> str:
        """Create a scenario; returns its base (append the provider's base path, e.g. ``+ "/v1"``)."""
        self._n += 1
        name = name or f"sc{os.getpid()}-{self._n}-{time.monotonic_ns()}"
        body = msgspec.json.encode({"steps": steps or [{}]})
        resp = request("POST", f"{self.url}/_mock/scenarios/{name}", body=body)
        assert resp.status == 200, resp.text
        return f"{self.url}/s/{name}"

    def calls(self, base: str) -> dict:
        name = base.rstrip("/").split("/s/")[1].split("/")[0]
        resp = request("GET", f"{self.url}/_mock/scenarios/{name}")
        assert resp.status == 200, resp.text
        return resp.json()
