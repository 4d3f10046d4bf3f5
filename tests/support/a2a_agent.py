"""A real A2A agent for the agent gateway's tests, on loopback: the SDK agent of ``tests/support/a2a_agent_app.py``
(what it answers, its card, its control route: that module's docstring) in a subprocess of its own.

``with start_a2a_agent("alpha") as agent:`` gives ``agent.base`` (the URL a registration names: the card is at
``{base}/.well-known/agent-card.json``), ``agent.rpc_url`` (its JSON-RPC endpoint, as its card says),
``agent.card()`` and ``agent.received()`` (the requests its JSON-RPC route got, headers lower-cased).
``require_header=(name, value)`` makes its JSON-RPC route answer 401 without that header.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.support.http import request
from tests.support.servers import free_port, wait_port

_ROOT = Path(__file__).resolve().parents[2]
CARD_PATH = "/.well-known/agent-card.json"


class A2ATestAgent:
    def __init__(self, name: str, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.name = name
        self.proc = proc
        self.port = port
        self.log = log
        self.base = f"http://127.0.0.1:{port}"
        self.rpc_url = f"{self.base}/a2a"

    def card(self) -> dict[str, Any]:
        answer = request("GET", f"{self.base}{CARD_PATH}", timeout=10)
        assert answer.status == 200, answer.text
        return answer.json()

    def received(self) -> list[dict[str, Any]]:
        """The requests to the JSON-RPC route, oldest first: ``{method, path, headers, body}``."""
        return request("GET", f"{self.base}/control", timeout=10).json()["received"]

    def clear_received(self) -> None:
        request("POST", f"{self.base}/control", timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


def start_a2a_agent(name: str, *, require_header: tuple[str, str] | None = None,
                    timeout: float = 30.0) -> A2ATestAgent:
    """Start the SDK agent ``name`` and wait until its card is served."""
    port = free_port()
    args = [sys.executable, "-m", "tests.support.a2a_agent_app", "--name", name, "--port", str(port)]
    if require_header:
        args += ["--require-header", f"{require_header[0]}:{require_header[1]}"]
    log = Path(tempfile.mkstemp(prefix=f"a2a-{name}-", suffix=".log")[1])
    with log.open("wb") as output:
        proc = subprocess.Popen(args, stdout=output, stderr=subprocess.STDOUT, cwd=str(_ROOT))
    agent = A2ATestAgent(name, proc, port, log)
    try:
        wait_port(port, proc, timeout)
        agent.card()
    except Exception:  # noqa: BLE001 - any start failure: stop the process, report its output
        agent.stop()
        raise RuntimeError(f"A2A test agent {name} did not start:\n{agent.output()}") from None
    return agent
