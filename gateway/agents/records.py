"""One agent call through the gateway as the rest of the house sees a request: admitted by the workspace's rate-limit
policies and written as a request record (``/v1/logs``, the log stream, aggregates, the console, metrics), as MCP
tool calls are (``gateway/mcp/records.py``; both are ``gateway/policies/calls.py``'s record and hold).

The record names the agent as its ``provider`` (``agent:<slug>``) and the agent's card ``name`` (its slug when the
card has none) as its ``model``, so the logs' filters, the aggregates' groupings, the metrics' ``provider`` and
``model`` labels and the policies' conditions reach agent calls without new columns; its ``endpoint`` is
``a2a.<method>`` (``a2a.SendMessage``, ``a2a.message/stream``). Its metadata (beside the client's
``x-gateway-metadata``) holds ``agent``, ``a2a_method``, ``a2a_task_id`` (the task the request or the answer
named), ``a2a_bytes_in``, ``a2a_bytes_out`` and, for an answer that was a JSON-RPC error, ``a2a_error_code``. A call
refused after its agent was found (a bad request, a rate limit, a guardrail) is recorded too, with its error.
Policies count a call as one request; it reserves nothing of a token or cost budget (a call has no tokens).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.agents import wire
from gateway.controlplane.keys import KeyRecord
from gateway.http.context import RequestContext
from gateway.policies.calls import CallRecord
from gateway.schema.agent_target import AgentTarget

PROVIDER_PREFIX = "agent:"


class _Named(msgspec.Struct):
    name: Any = None


_card_name = msgspec.json.Decoder(_Named)


def agent_name(target: AgentTarget) -> str:
    """The card's ``name`` (the slug when it has none)."""
    try:
        name = _card_name.decode(target.card).name
    except (msgspec.DecodeError, msgspec.ValidationError):
        name = None
    return name if isinstance(name, str) and name else target.slug


class AgentCall(CallRecord):
    """The record and policy hold of one call (``gateway/policies/calls.py``)."""

    __slots__ = ("target", "method", "body_len", "task_id")

    def __init__(self, ctx: RequestContext, key: KeyRecord, target: AgentTarget, method: str, body_len: int,
                 started: float) -> None:
        super().__init__(ctx, key.workspace, f"a2a.{method}" if method else "a2a", PROVIDER_PREFIX + target.slug,
                         agent_name(target), started)
        self.target = target
        self.method = method
        self.body_len = body_len
        self.task_id: str | None = None

    def ended(self, status: int, bytes_out: int, error_code: int | None, error: str | None = None) -> AgentCall:
        """The call ended with HTTP ``status`` after sending ``bytes_out`` bytes (``error_code``: the JSON-RPC error
        it was answered with, ``error``: its message): its record completed."""
        self.complete(status, {"agent": self.target.slug, "a2a_method": self.method or None,
                               "a2a_task_id": self.task_id, "a2a_bytes_in": self.body_len,
                               "a2a_bytes_out": bytes_out}, "a2a_error_code", error_code, error)
        return self

    def refused(self, error: wire.RpcError, bytes_out: int) -> AgentCall:
        return self.ended(error.status, bytes_out, error.code, error.message)
