"""One call that is no model request (an MCP tool call, an A2A agent call) as the rest of the house sees a request:
admitted by the workspace's rate-limit policies and written as a request record (``/v1/logs``, the log stream,
aggregates, the console, metrics).

The caller names what was called as the record's ``provider`` and ``model`` (``mcp:<slug>`` and the tool, or
``agent:<slug>`` and the agent's name), so the logs' filters, the aggregates' groupings, the metrics' labels and the
policies' conditions reach such calls without new columns, and gives the metadata of its protocol (beside the
client's ``x-gateway-metadata``). Policies count a call as one request; it reserves nothing of a token or cost
budget (a call has no tokens). A call answered with a JSON-RPC error is recorded with ``JSON-RPC error <code>`` (and
its message when there is one), one the client left with ``client disconnected``.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.http.context import RequestContext
from gateway.observability.record import RequestRecord


class CallRecord:
    """The record and policy hold of one call."""

    __slots__ = ("ctx", "workspace", "record", "hold", "policies")

    def __init__(self, ctx: RequestContext, workspace: str, endpoint: str, provider: str, model: str | None,
                 started: float) -> None:
        self.ctx = ctx
        self.workspace = workspace
        record = RequestRecord(ctx.trace_id, endpoint, started)
        record.workspace = workspace
        record.provider = provider
        record.model = model
        record.request_headers = ctx.raw_headers
        record.sensitive_headers = ctx.sensitive_headers
        record.span_id = ctx.span_id
        record.parent_span_id = ctx.parent_span_id
        self.record = record
        self.hold: Any = None
        self.policies: Any = None

    async def admit(self, policies: Any) -> None:
        """Count the call against the workspace's policies (a 429 GatewayError when one is spent)."""
        if policies is not None and policies.may_apply(self.workspace):
            self.policies = policies
            self.hold = await policies.admit_as(self.ctx, None, 0, self.record.provider, self.record.model)

    def complete(self, status: int, fields: dict[str, Any], code_field: str, error_code: int | None,
                 error: str | None = None) -> None:
        """The call ended with HTTP ``status``: its record completed, ``fields`` added to its metadata and, for an
        answer that was a JSON-RPC error, ``error_code`` under ``code_field`` (``error``: the error's message)."""
        record = self.record
        record.status = status
        record.total_s = time.perf_counter() - record.started
        meta: dict[str, Any] = dict(self.ctx.metadata or {})
        meta.update(fields)
        if error_code is not None:
            meta[code_field] = error_code
            record.error = f"JSON-RPC error {error_code}" + (f": {error}" if error else "")
        elif status == 499:
            record.error = "client disconnected"
        record.metadata = meta

    def done(self, recorder: Any) -> None:
        """Hand off the record (and settle the call's policy hold)."""
        if self.hold is not None:
            self.policies.finish(self.hold, self.record)
        recorder.record(self.record)
