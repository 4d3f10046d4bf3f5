"""Agent routes of the control plane: ``/v1/agents`` create and list, ``/v1/agents/{slug}`` get, update and delete,
and ``POST /v1/agents/{slug}/refresh`` (read the agent's card again). The data path's routes on the same paths
(``POST /v1/agents/{slug}``, the card the gateway serves) are not these: gateway/api/agents.py.

``POST`` ``{slug, url, headers?, config?, workspace_id?}`` checks the fields, then reads the agent's card from its
well-known location through the SSRF guard and validates it (``gateway.controlplane.agent_cards``): a card that
cannot be read or fails validation is that error (400, 403, 413, 502, 504) and nothing is stored. ``PUT`` changes
the keys it names (null removes one; ``slug`` cannot change); a new ``url`` or ``headers`` reads the card again the
same way. A refresh reads it again and keeps the old card when the new one fails (answering the error); a card whose
endpoint moved to another origin is refused while the record holds headers, which would follow it (a ``PUT`` that
sends them again accepts it). docs/control-plane.md, "Agents".
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import msgspec

from gateway.api.admin import ADMIN_BODY_LIMIT, Caller, authorize, send_record
from gateway.api.crud import SlugRoutes
from gateway.controlplane import agent_cards, agents
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.records import now_iso
from gateway.controlplane.secrets import SecretError
from gateway.http.body import read_request_body
from gateway.http.errors import Conflict, GatewayError
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.schema.common import BodyDecoder
from gateway.upstream.transport import UpstreamTransport

#: (method, path, handler name) of every route here, for the app to mount before this module is imported
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", "/v1/agents", "create"),
    ("GET", "/v1/agents", "list"),
    ("GET", "/v1/agents/{slug}", "get"),
    ("PUT", "/v1/agents/{slug}", "update"),
    ("DELETE", "/v1/agents/{slug}", "delete"),
    ("POST", "/v1/agents/{slug}/refresh", "refresh"),
)


class AgentBody(agents.AgentFields, forbid_unknown_fields=True):
    workspace_id: str | None = None


class RefreshBody(msgspec.Struct, forbid_unknown_fields=True):
    workspace_id: str | None = None


_body = BodyDecoder(AgentBody)
_refresh_body = BodyDecoder(RefreshBody)


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


class AgentRoutes(SlugRoutes[agents.Agent, AgentBody]):
    path = "/v1/agents"
    object = "agent"
    instead = "register a new agent"

    def __init__(self, keys: KeyStore, records: RecordCache, transport: UpstreamTransport,
                 check_host: agent_cards.CheckHost) -> None:
        super().__init__(keys, records.agents, _body)
        self.records = records
        self.transport = transport
        self.check_host = check_host

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [(method, path, getattr(self, name)) for method, path, name in ROUTES]

    def _headers(self, record: agents.Agent) -> dict[str, str]:
        try:
            return agents.headers_of(self.records.box, record)
        except SecretError as exc:
            raise GatewayError(f"agent '{record.slug}' cannot be used: {exc}", param="slug") from None

    async def _card(self, slug: str, fields: dict[str, Any]) -> agents.Card:
        return await agent_cards.fetch(self.transport, self.check_host, slug, fields["url"],
                                       fields.get("headers") or {})

    # -- the record routes -----------------------------------------------------------------------------------

    async def build(self, caller: Caller, workspace: str, body: AgentBody) -> agents.Agent:
        slug, fields = self.created_fields(body)
        agents.check_fields(fields)
        if await self.repo.lookup(workspace, slug) is not None:  # before reading the card
            raise Conflict(f"agent '{slug}' already exists in this workspace", param="slug")
        card = await self._card(slug, fields)
        record = agents.build(self.records.box, workspace, slug, fields, card, now_iso())
        return msgspec.structs.replace(record, organisation_id=caller.key.organisation)

    async def shown(self, record: agents.Agent) -> Any:
        return record.public()

    async def updated(self, record: agents.Agent, workspace: str, body: AgentBody) -> agents.Agent:
        changes = self.changed_fields(body, record.slug)
        try:
            fields = agents.changed_fields(self.records.box, record, changes)
        except SecretError as exc:
            raise GatewayError(f"agent '{record.slug}' cannot be updated: {exc}", param="slug") from None
        card = None
        if fields["url"] != record.url or "headers" in changes:
            card = await self._card(record.slug, fields)  # the new address or credentials must reach the agent
        return agents.rebuilt(self.records.box, record, fields, card, now_iso())

    # -- refresh -----------------------------------------------------------------------------------------------

    async def refresh(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.write_scope, query=("workspace_id",))
        raw = await read_request_body(scope, receive, ADMIN_BODY_LIMIT)
        body = _refresh_body.decode(raw) if raw.strip() else RefreshBody()
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        slug = self.record_id(scope)
        read: agents.Agent | None = None
        card: agents.Card | None = None

        async def refreshed(record: agents.Agent) -> agents.Agent:  # again on the record stored if another wrote
            nonlocal read, card
            if card is None or read is None or (record.url, record.sealed) != (read.url, read.sealed):
                read, card = record, await self._card(record.slug, {"url": record.url,
                                                                    "headers": self._headers(record)})
            if record.sealed is not None and _origin(card.endpoint) != _origin(record.endpoint):
                raise Conflict(f"agent '{record.slug}' now gives its endpoint as {card.endpoint[:200]}, another "
                               f"origin than {record.endpoint[:200]}, and its stored headers would be sent there: the "
                               "card is kept as it was; to accept the move, PUT the agent with its headers sent "
                               "again", param="card.url")
            return agents.with_card(record, card, now_iso())

        await send_record(send, await self.shown(await self.repo.update(workspace, slug, refreshed)))
