"""What the agent data path needs of a registered A2A agent: where its JSON-RPC endpoint is, the headers the
gateway sends it (opened from the sealed record) and its validated agent card, as one immutable value built from
the control-plane record.

The control plane (``gateway/controlplane/agents.py``) owns the stored record and builds this value
(``gateway.controlplane.directory.RecordCache.agent_target``); the agent package (``gateway/agents/``: the card the
gateway serves, the JSON-RPC relay, records) reads it, so it never sees sealed blobs or the record's storage shape.
It lives here, below both, as ``gateway.schema.mcp_target`` does for MCP servers.
"""

from __future__ import annotations

import msgspec


class AgentTarget(msgspec.Struct, frozen=True, kw_only=True):
    """A registered A2A agent as the data path sees it."""

    slug: str
    workspace: str
    #: the agent's JSON-RPC endpoint (http or https, from its card), checked by the SSRF guard at every connection
    endpoint: str
    #: the agent's card as fetched and validated at create or refresh (a JSON object; at most 1 MB), unchanged
    card: bytes
    #: the A2A protocol revision the card declares for its JSON-RPC interface (e.g. "1.0" or "0.3"), "" if none
    protocol_version: str = ""
    #: headers the gateway sends the agent (its credentials), opened from the sealed record; never logged
    headers: dict[str, str] = {}
    #: the config whose guardrails judge this agent's message text (inline JSON or a saved config's id) when the
    #: request names none
    config: str | None = None
