"""What the MCP data path needs of a registered server: its address, the headers the gateway sends it (opened from
the sealed record) and the tools an admin approved, as one immutable value built from the control-plane record.

The control plane (``gateway/controlplane/mcp_servers.py``) owns the stored record and builds this value; the MCP
package (``gateway/mcp/``: the relay, the tool catalogue, the upstream client) reads it, so they never see sealed
blobs or the record's storage shape. It lives here, below both (the MCP package sits above the control plane: it
authenticates keys), as the config's shape does (``gateway.schema.config``); ``gateway.mcp.target`` re-exports it.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ToolPin(msgspec.Struct, frozen=True, kw_only=True):
    """One tool definition as an admin approved it: a tool whose upstream definition no longer has this ``digest``
    is withheld until approved again."""

    name: str
    description: str | None = None
    #: the tool's ``inputSchema`` as the server listed it
    input_schema: dict[str, Any] = {}
    #: sha256 (hex) of the canonical JSON of name, description and input schema (``catalog.tool_digest``)
    digest: str
    approved_at: str = ""


class ServerTarget(msgspec.Struct, frozen=True, kw_only=True):
    """A registered MCP server as the data path sees it."""

    slug: str
    workspace: str
    #: the server's Streamable HTTP endpoint (http or https), checked by the SSRF guard at every connection
    url: str
    #: headers the gateway sends the server (its credentials), opened from the sealed record; never logged
    headers: dict[str, str] = {}
    #: the tool names the server's record allows (None: every approved tool)
    allowed_tools: tuple[str, ...] | None = None
    #: approved tool definitions by tool name
    pins: dict[str, ToolPin] = {}
    #: the config whose guardrails judge this server's tool calls (inline JSON or a saved config's id) when the
    #: request names none
    config: str | None = None


def tool_digest(tool: dict[str, Any]) -> str:
    """sha256 (hex) of what pinning compares of a listed tool: its ``name``, ``description`` and ``inputSchema``, as
    canonical JSON (keys sorted), so a reordered schema is the same tool and a changed word is not."""
    import hashlib
    import json

    shown = {"name": tool.get("name"), "description": tool.get("description"), "inputSchema": tool.get("inputSchema")}
    return hashlib.sha256(json.dumps(shown, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
