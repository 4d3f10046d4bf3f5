"""The worker's MCP gateway objects, built on the first MCP request (or admin call) so a worker that serves none
never loads them: the upstream client, the tool catalogue, the relay, the client sessions and the guardrails of tool
calls."""

from __future__ import annotations

from gateway.mcp.catalog import Catalog
from gateway.mcp.forward import Forwarder
from gateway.mcp.guard import CallGuard
from gateway.mcp.relay import Relay
from gateway.mcp.sessions import Sessions
from gateway.mcp.upstream import McpUpstream
from gateway.settings import Settings
from gateway.state.base import StateStore
from gateway.upstream.transport import UpstreamTransport


class McpService:
    def __init__(self, settings: Settings, transport: UpstreamTransport, store: StateStore, guard: CallGuard) -> None:
        self.upstream = McpUpstream(transport, timeout_s=settings.mcp_timeout_ms / 1000,
                                    max_bytes=settings.max_upstream_body_bytes)
        self.catalog = Catalog(self.upstream, settings.mcp_list_ttl_ms / 1000)
        self.relay = Relay(self.catalog)
        self.sessions = Sessions(store, settings.mcp_session_ttl_ms / 1000)
        self.guard = guard
        self.forwarder = Forwarder(self.upstream)
