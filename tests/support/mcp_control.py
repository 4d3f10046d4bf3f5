"""The control API of the MCP test servers (``tests/support/mcp_servers.py``): the operations a test sends to
``POST /control`` to change a running server, and the record of what the server received.

An operation is a JSON object tagged by ``op``; the server answers 200 with ``{"ok": true}`` (or the requested
record), 400 with ``{"error": {"message": ...}}`` naming the field it could not use.
"""

from __future__ import annotations

from typing import Any

import msgspec


class SetDescription(msgspec.Struct, tag_field="op", tag="set_description", forbid_unknown_fields=True):
    """Change a tool's description (a "rug pull": same name and schema, new text)."""

    tool: str
    description: str


class AddTool(msgspec.Struct, tag_field="op", tag="add_tool", forbid_unknown_fields=True):
    """Add a tool ``tool(text: str) -> str`` answering ``"<tool>: <text>"``."""

    tool: str
    description: str


class RemoveTool(msgspec.Struct, tag_field="op", tag="remove_tool", forbid_unknown_fields=True):
    tool: str


class SlowNext(msgspec.Struct, tag_field="op", tag="slow_next", forbid_unknown_fields=True):
    """Hold the next ``count`` MCP POSTs ``seconds`` before the SDK sees them (only those of JSON-RPC ``method``
    when given, so a gateway's own ``tools/list`` does not use up what a test meant for its ``tools/call``)."""

    count: int
    seconds: float
    method: str | None = None


class ReadReceived(msgspec.Struct, tag_field="op", tag="received", forbid_unknown_fields=True):
    """The last ``last`` requests to the MCP endpoint, oldest first."""

    last: int = 20


class ClearReceived(msgspec.Struct, tag_field="op", tag="clear_received", forbid_unknown_fields=True):
    pass


ControlOp = SetDescription | AddTool | RemoveTool | SlowNext | ReadReceived | ClearReceived


class ReceivedRequest(msgspec.Struct):
    """One request to the MCP endpoint as it arrived, before any check (a refused one too)."""

    method: str
    path: str
    #: names lower-cased; a repeated header's values joined with ", "
    headers: dict[str, str]
    #: the decoded JSON body, the text when it is not JSON, None when empty
    body: Any = None

    @property
    def jsonrpc_method(self) -> str | None:
        return self.body.get("method") if isinstance(self.body, dict) else None


class ReceivedRequests(msgspec.Struct):
    requests: list[ReceivedRequest]


class ServerState(msgspec.Struct):
    """``GET /control``: what the server is and which tools it lists now."""

    name: str
    era: str
    tools: list[str]
