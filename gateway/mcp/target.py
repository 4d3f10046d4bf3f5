"""The data path's view of a registered MCP server (``ServerTarget``, ``ToolPin``, ``tool_digest``): defined in
``gateway.schema.mcp_target``, below the control plane that builds it from its record, and named here for the MCP
package that reads it.
"""

from gateway.schema.mcp_target import ServerTarget, ToolPin, tool_digest

__all__ = ["ServerTarget", "ToolPin", "tool_digest"]
