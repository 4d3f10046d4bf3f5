"""One ``tools/call`` through the gateway as the rest of the house sees a request: admitted by the workspace's
rate-limit policies and written as a request record (``/v1/logs``, the log stream, aggregates, the console,
metrics).

The record names the server as its ``provider`` (``mcp:<slug>``) and the tool as its ``model``, so the logs'
filters, the aggregates' groupings, the metrics' ``provider`` and ``model`` labels and the policies' conditions
(``provider``, ``model``) reach MCP calls without new columns; its ``endpoint`` is ``mcp.tools/call``. Its
metadata (beside the client's ``x-gateway-metadata``) holds ``mcp_server``, ``mcp_tool``, ``mcp_bytes_in``,
``mcp_bytes_out`` and, for an answer that was a JSON-RPC error, ``mcp_error_code``. A call refused before any
server saw it (an unknown, withheld or forbidden tool) is recorded too, with its error. Policies count a call as one
request; it reserves nothing of a token or cost budget (a call has no tokens). The record and the hold are
``gateway/policies/calls.py``'s, as an agent call's are.
"""

from __future__ import annotations

from gateway.controlplane.keys import KeyRecord
from gateway.http.context import RequestContext
from gateway.mcp import wire
from gateway.mcp.relay import Forward
from gateway.mcp.target import SEPARATOR, ServerTarget
from gateway.policies.calls import CallRecord

ENDPOINT = "mcp.tools/call"


class McpCall(CallRecord):
    """The record and policy hold of one tool call (``gateway/policies/calls.py``)."""

    __slots__ = ("forward", "body_len")

    def __init__(self, ctx: RequestContext, key: KeyRecord, forward: Forward, body_len: int, started: float) -> None:
        provider = f"mcp:{forward.target.slug}" if forward.target.slug else "mcp"
        super().__init__(ctx, key.workspace, ENDPOINT, provider, forward.tool, started)
        self.forward = forward
        self.body_len = body_len

    def ended(self, status: int, bytes_out: int, error_code: int | None) -> McpCall:
        """The call ended with HTTP ``status`` after sending ``bytes_out`` bytes (``error_code``: the JSON-RPC error
        it was answered with): its record completed."""
        self.complete(status, {"mcp_server": self.forward.target.slug or None, "mcp_tool": self.forward.tool,
                               "mcp_bytes_in": self.body_len, "mcp_bytes_out": bytes_out},
                      "mcp_error_code", error_code)
        return self


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
