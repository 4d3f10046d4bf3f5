"""The worker's agent data path objects, built on the first agent call (or card read) so a worker that serves none
never loads them: the upstream client, the relay and the guardrails of agent calls."""

from __future__ import annotations

from gateway.agents.guard import AgentGuard
from gateway.agents.relay import AgentRelay
from gateway.agents.upstream import AgentUpstream
from gateway.settings import Settings
from gateway.upstream.transport import UpstreamTransport


class AgentService:
    def __init__(self, settings: Settings, transport: UpstreamTransport, guard: AgentGuard) -> None:
        self.upstream = AgentUpstream(transport, timeout_s=settings.agent_timeout_ms / 1000,
                                      max_bytes=settings.max_upstream_body_bytes)
        self.relay = AgentRelay(self.upstream)
        self.guard = guard
