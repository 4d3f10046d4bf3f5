"""The data path's view of a registered MCP server (``ServerTarget``, ``ToolPin``, ``tool_digest``): defined in
``gateway.schema.mcp_target``, below the control plane that builds it from its record, and named here for the MCP
package that reads it; and ``SEPARATOR``, what joins a server's slug and a tool's name on the combined endpoint
(``/v1/mcp``), which the control plane's slug check reads too (from here, so that check does not import the MCP
data path's catalog, client and wire at a worker's start).
"""

from gateway.schema.mcp_target import ServerTarget, ToolPin, tool_digest

#: joins a server's slug and a tool's or prompt's name on ``/v1/mcp`` (``<slug>__<name>``); slugs cannot hold it
SEPARATOR = "__"

__all__ = ["SEPARATOR", "ServerTarget", "ToolPin", "tool_digest"]
