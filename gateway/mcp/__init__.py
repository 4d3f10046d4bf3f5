"""The MCP gateway: remote MCP servers (Streamable HTTP) behind the gateway's keys, scopes, pins, logs and limits
(docs/mcp.md)."""
