"""A real A2A agent for the agent gateway's tests, on loopback: the SDK agent of ``tests/support/a2a_agent_app.py``
(what it answers, its card, its control route: that module's docstring) in a subprocess of its own.

``with start_a2a_agent("alpha") as agent:`` gives ``agent.base`` (the URL a registration names: the card is at
``{base}/.well-known/agent-card.json``), ``agent.rpc_url`` (its JSON-RPC endpoint, as its card says),
``agent.card()`` and ``agent.received()`` (the requests its JSON-RPC route got, headers lower-cased).
``require_header=(name, value)`` makes its JSON-RPC route answer 401 without that header.
"""

from __future__ import annotations

from typing import Any

from tests.support.app_process import AppProcess
from tests.support.http import request

CARD_PATH = "/.well-known/agent-card.json"


class A2ATestAgent(AppProcess):
    what = "A2A test agent"

    def __init__(self, name: str, args: list[str]) -> None:
        super().__init__("tests.support.a2a_agent_app", name, args)
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


def start_a2a_agent(name: str, *, require_header: tuple[str, str] | None = None,
                    timeout: float = 30.0) -> A2ATestAgent:
    """Start the SDK agent ``name`` and wait until its card is served."""
    args = ["--require-header", f"{require_header[0]}:{require_header[1]}"] if require_header else []
    agent = A2ATestAgent(name, args)
    return agent.ready(agent.card, timeout)
