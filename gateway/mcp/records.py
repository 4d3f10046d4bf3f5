"""One ``tools/call`` through the gateway as the rest of the house sees a request: admitted by the workspace's
rate-limit policies and written as a request record (``/v1/logs``, the log stream, aggregates, the console,
metrics).

The record names the server as its ``provider`` (``mcp:<slug>``) and the tool as its ``model``, so the logs'
filters, the aggregates' groupings, the metrics' ``provider`` and ``model`` labels and the policies' conditions
(``provider``, ``model``) reach MCP calls without new columns; its ``endpoint`` is ``mcp.tools/call``. Its
metadata (beside the client's ``x-gateway-metadata``) holds ``mcp_server``, ``mcp_tool``, ``mcp_bytes_in``,
``mcp_bytes_out`` and, for an answer that was a JSON-RPC error, ``mcp_error_code``. A call refused before any
server saw it (an unknown, withheld or forbidden tool) is recorded too, with its error. Policies count a call as one
request; it reserves nothing of a token or cost budget (a call has no tokens).
"""

from __future__ import annotations

import time
from typing import Any

from gateway.controlplane.keys import KeyRecord
from gateway.http.context import RequestContext
from gateway.mcp import wire
from gateway.mcp.catalog import SEPARATOR
from gateway.mcp.relay import Forward
from gateway.mcp.target import ServerTarget
from gateway.observability.record import RequestRecord

ENDPOINT = "mcp.tools/call"


class McpCall:
    """The record and policy hold of one tool call."""

    __slots__ = ("ctx", "key", "forward", "body_len", "record", "hold", "policies")

    def __init__(self, ctx: RequestContext, key: KeyRecord, forward: Forward, body_len: int, started: float) -> None:
        self.ctx = ctx
        self.key = key
        self.forward = forward
        self.body_len = body_len
        record = RequestRecord(ctx.trace_id, ENDPOINT, started)
        record.workspace = key.workspace
        record.provider = f"mcp:{forward.target.slug}" if forward.target.slug else "mcp"
        record.model = forward.tool
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

    def ended(self, status: int, bytes_out: int, error_code: int | None) -> McpCall:
        """The call ended with HTTP ``status`` after sending ``bytes_out`` bytes (``error_code``: the JSON-RPC error
        it was answered with): its record completed."""
        record = self.record
        record.status = status
        record.total_s = time.perf_counter() - record.started
        meta: dict[str, Any] = dict(self.ctx.metadata or {})
        meta.update(mcp_server=self.forward.target.slug or None, mcp_tool=self.forward.tool,
                    mcp_bytes_in=self.body_len, mcp_bytes_out=bytes_out)
        if error_code is not None:
            meta["mcp_error_code"] = error_code
            record.error = f"JSON-RPC error {error_code}"
        elif status == 499:
            record.error = "client disconnected"
        record.metadata = meta
        return self

    def done(self, recorder: Any) -> None:
        """Hand off the record (and settle the call's policy hold)."""
        if self.hold is not None:
            self.policies.finish(self.hold, self.record)
        recorder.record(self.record)


def refused_call(ctx: RequestContext, key: KeyRecord, message: wire.Message, single: ServerTarget | None,
                 body_len: int, started: float, error: wire.RpcError, bytes_out: int) -> McpCall:
    """The record of a ``tools/call`` refused before any server saw it (an unknown, withheld or forbidden tool, a
    malformed call): the server when the endpoint or the name tells it, the tool as the client named it."""
    name = message.param("name")
    tool = name if isinstance(name, str) else None
    target = single or ServerTarget(slug="", workspace=key.workspace, url="")
    if single is None and tool is not None and SEPARATOR in tool:
        slug, _, tool = tool.partition(SEPARATOR)
        target = ServerTarget(slug=slug, workspace=key.workspace, url="")
    return McpCall(ctx, key, Forward(target, message, tool), body_len, started).ended(error.status, bytes_out,
                                                                                      error.code)
