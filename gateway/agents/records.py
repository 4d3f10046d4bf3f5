"""One agent call through the gateway as the rest of the house sees a request: admitted by the workspace's rate-limit
policies and written as a request record (``/v1/logs``, the log stream, aggregates, the console, metrics), as MCP
tool calls are (``gateway/mcp/records.py``).

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

import time
from typing import Any

import msgspec

from gateway.agents import wire
from gateway.controlplane.keys import KeyRecord
from gateway.http.context import RequestContext
from gateway.observability.record import RequestRecord
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


class AgentCall:
    """The record and policy hold of one call."""

    __slots__ = ("ctx", "key", "target", "method", "body_len", "task_id", "record", "hold", "policies")

    def __init__(self, ctx: RequestContext, key: KeyRecord, target: AgentTarget, method: str, body_len: int,
                 started: float) -> None:
        self.ctx = ctx
        self.key = key
        self.target = target
        self.method = method
        self.body_len = body_len
        self.task_id: str | None = None
        record = RequestRecord(ctx.trace_id, f"a2a.{method}" if method else "a2a", started)
        record.workspace = key.workspace
        record.provider = PROVIDER_PREFIX + target.slug
        record.model = agent_name(target)
        record.request_headers = ctx.raw_headers
        record.sensitive_headers = ctx.sensitive_headers
        record.span_id = ctx.span_id
        record.parent_span_id = ctx.parent_span_id
        self.record = record
        self.hold: Any = None
        self.policies: Any = None

    async def admit(self, policies: Any) -> None:
        """Count the call against the workspace's policies (a 429 GatewayError when one is spent)."""
        if policies is not None and policies.may_apply(self.key.workspace):
            self.policies = policies
            self.hold = await policies.admit_as(self.ctx, None, 0, self.record.provider, self.record.model)

    def ended(self, status: int, bytes_out: int, error_code: int | None, error: str | None = None) -> AgentCall:
        """The call ended with HTTP ``status`` after sending ``bytes_out`` bytes (``error_code``: the JSON-RPC error
        it was answered with, ``error``: its message): its record completed."""
        record = self.record
        record.status = status
        record.total_s = time.perf_counter() - record.started
        meta: dict[str, Any] = dict(self.ctx.metadata or {})
        meta.update(agent=self.target.slug, a2a_method=self.method or None, a2a_task_id=self.task_id,
                    a2a_bytes_in=self.body_len, a2a_bytes_out=bytes_out)
        if error_code is not None:
            meta["a2a_error_code"] = error_code
            record.error = f"JSON-RPC error {error_code}" + (f": {error}" if error else "")
        elif status == 499:
            record.error = "client disconnected"
        record.metadata = meta
        return self

    def refused(self, error: wire.RpcError, bytes_out: int) -> AgentCall:
        return self.ended(error.status, bytes_out, error.code, error.message)

    def done(self, recorder: Any) -> None:
        """Hand off the record (and settle the call's policy hold)."""
        if self.hold is not None:
            self.policies.finish(self.hold, self.record)
        recorder.record(self.record)
