"""A test app run in a subprocess of its own on a loopback port (``python -m <module> --name <name> --port <port>``,
its output in a log file): the SDK servers the MCP and agent gateway tests talk to (``tests/support/mcp_servers.py``,
``tests/support/a2a_agent.py``) are these, each adding the calls of its own control route.

``ready(probe)`` waits until the port opens and ``probe`` (a request the app answers) passes; a start that fails
stops the process and raises with its output. ``stop_process`` ends any subprocess the support starts: SIGTERM,
then SIGKILL when it has not exited in time.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Self

from tests.support.servers import free_port, wait_port

_ROOT = Path(__file__).resolve().parents[2]


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """End ``proc`` if it still runs: terminate, then kill after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class AppProcess:
    """``python -m module --name name --port <a free port> *args`` started: ``.base`` (its URL), ``.output()``,
    ``.stop()``; also a context manager stopping it."""

    #: what the app is, in a failed start's error (``MCP test server``)
    what = "test app"

    def __init__(self, module: str, name: str, args: list[str]) -> None:
        self.name = name
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix=f"{module.rsplit('.', 1)[-1]}-{name}-", suffix=".log")[1])
        command = [sys.executable, "-m", module, "--name", name, "--port", str(self.port), *args]
        with self.log.open("wb") as output:
            self.proc = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=str(_ROOT))

    def ready(self, probe: Callable[[], object], timeout: float) -> Self:
        """Wait for the port and ``probe``; a failure stops the process and raises naming its output."""
        try:
            wait_port(self.port, self.proc, timeout)
            probe()
        except Exception:  # noqa: BLE001 - any start failure: stop the process, report its output
            self.stop()
            raise RuntimeError(f"{self.what} {self.name} did not start:\n{self.output()}") from None
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
