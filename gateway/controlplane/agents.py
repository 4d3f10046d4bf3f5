"""A2A agents: a remote agent the workspace's keys call through the gateway, stored per workspace with the headers
the gateway sends it sealed at rest and the agent card it served when it was registered or last refreshed.

What a user sees (routes, fields, masking, card rules): docs/control-plane.md, "Agents". This module owns the
record and its rules; ``gateway.controlplane.agent_cards`` fetches and validates the card a record keeps:

- ``url`` is the agent's base URL, ``http://`` or ``https://`` only, in the SSRF guard's form without a query
  (``gateway.upstream.ssrf.check_base_url``); the card is read from ``{url}/.well-known/agent-card.json`` and the
  address is checked by the routes before each read.
- ``headers`` (the gateway's credential to the agent) are sealed together as one JSON object, bound to the record's
  kind, workspace and slug, and shown masked exactly as MCP servers' headers (``sealed_headers``); the names and
  values follow MCP servers' rules, with the headers the A2A relay writes itself reserved. A change of ``url``
  must send them again or remove them: a credential never follows a move silently
  (``secret_hosts.check_slug_move``).
- ``card`` is the validated card's JSON text as the agent served it, with what the gateway read from it:
  ``name``, ``endpoint`` (the JSON-RPC URL the data path sends to, http(s) in the SSRF guard's form) and
  ``protocol_version``.

``target`` opens a record into the ``AgentTarget`` the data path reads (``gateway.controlplane.directory`` caches
them per worker).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.controlplane import sealed_headers
from gateway.controlplane.mcp_servers import MAX_URL, check_config_ref, check_headers
from gateway.controlplane.records import Entity, applied
from gateway.controlplane.sealing import looks_masked
from gateway.controlplane.secret_hosts import check_slug_move
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest
from gateway.schema.agent_target import AgentTarget
from gateway.upstream.ssrf import check_base_url, check_url

KIND = "agent"
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET
#: headers an agent's record may not set: hop-by-hop ones (RFC 9110 section 7.6.1) and those the gateway writes
#: itself on every request to an agent (framing, content negotiation, the A2A version and extension headers of
#: the 1.0 and 0.3 revisions, an event stream's resume point)
RESERVED_HEADERS = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    "proxy-authorization", "proxy-authenticate", "host", "content-length", "content-type", "content-encoding",
    "accept", "accept-encoding", "a2a-version", "a2a-extensions", "x-a2a-extensions", "last-event-id",
})


class AgentFields(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/agents`` and ``PUT /v1/agents/{slug}``: a key left out is unchanged by a PUT, a key
    sent as null is removed."""

    slug: str | None | Unset = UNSET
    url: str | None | Unset = UNSET
    headers: dict[str, str] | None | Unset = UNSET
    #: the config whose guardrails judge the agent's message text (a saved config's id or inline JSON)
    config: str | None | Unset = UNSET


class Card(msgspec.Struct, frozen=True, kw_only=True):
    """An agent card that passed validation (``agent_cards.validated``): its text and what the gateway reads of it."""

    #: the card's JSON text as the agent served it
    text: str
    name: str
    #: the JSON-RPC endpoint the data path sends to
    endpoint: str
    #: the A2A revision the card declares for that endpoint ("" when it names none)
    protocol_version: str = ""


class Agent(Entity, kw_only=True):
    """A stored agent: ``id`` is the slug (unique within its workspace)."""

    object: str = "agent"
    slug: str
    url: str
    #: the card's ``name``
    name: str = ""
    #: the headers as one sealed JSON object (None when there are none)
    sealed: str | None = None
    #: header name -> its masked value, for answers
    masked: dict[str, str] = {}
    #: the validated card's JSON text
    card: str = "{}"
    endpoint: str = ""
    protocol_version: str = ""
    #: the config whose guardrails judge its message text when a request names none
    config: str | None = None
    card_fetched_at: str = ""

    def public(self) -> dict[str, Any]:
        """The record as the API answers it: headers masked, the sealed blob left out, the card as an object."""
        return {
            "id": self.id, "object": self.object, "slug": self.slug, "url": self.url, "name": self.name,
            "headers": dict(self.masked), "endpoint": self.endpoint, "protocol_version": self.protocol_version,
            "config": self.config, "card": msgspec.Raw(self.card.encode()), "card_fetched_at": self.card_fetched_at,
            "workspace_id": self.workspace_id, "organisation_id": self.organisation_id,
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
        }


def _context(workspace: str, slug: str) -> str:
    return f"{KIND}/{workspace}/{slug}"


def check_agent_url(url: str, param: str = "url", base: bool = True) -> str:
    """``url`` when it is an http(s) URL in the SSRF guard's form of at most ``MAX_URL`` characters (``base``: a
    base URL the card's path is appended to, so without a query string); else a 400 naming ``param``."""
    if not url:
        raise InvalidRequest(f"{param} must not be empty", param=param)
    if len(url) > MAX_URL:
        raise InvalidRequest(f"{param} must be at most {MAX_URL} characters", param=param)
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise InvalidRequest(f"{param} must not hold whitespace or control characters", param=param)
    scheme, colon, rest = url.partition(":")
    if not colon or scheme.lower() not in ("http", "https") or not rest.startswith("//"):
        raise InvalidRequest(f"{param} must be an http:// or https:// URL, got {url[:80]!r}", param=param)
    (check_base_url if base else check_url)(url, param)
    return url


def check_fields(fields: dict[str, Any]) -> None:
    """400 naming the field unless the body's ``fields`` (``url`` required) are a valid agent's."""
    if fields.get("url") is None:
        raise InvalidRequest("url is required", param="url")
    check_agent_url(fields["url"])
    if fields.get("headers") is not None:
        check_headers(fields["headers"], RESERVED_HEADERS)
    if fields.get("config") is not None:
        check_config_ref(fields["config"])


def build(box: SecretBox, workspace: str, slug: str, fields: dict[str, Any], card: Card, fetched_at: str) -> Agent:
    """A record from the validated ``fields`` (the body's keys that are set) and the card read from ``url``."""
    check_fields(fields)
    sealed, masked = sealed_headers.sealed(box, _context(workspace, slug), fields.get("headers") or {})
    return Agent(
        id=slug, slug=slug, url=fields["url"], name=card.name, workspace_id=workspace, sealed=sealed,
        masked=masked, card=card.text, endpoint=card.endpoint,
        protocol_version=card.protocol_version, config=fields.get("config"), card_fetched_at=fetched_at,
    )


def headers_of(box: SecretBox, record: Agent) -> dict[str, str]:
    """The record's headers, opened (SecretError when another key sealed them)."""
    return sealed_headers.opened(box, _context(record.workspace_id, record.slug), record.sealed)


def changed_fields(box: SecretBox, record: Agent, changes: dict[str, Any]) -> dict[str, Any]:
    """The fields ``record`` has once an update's ``changes`` apply (``headers`` opened): a given key replaces
    (``headers`` as a whole; a masked value sent back unchanged keeps the stored one), a key sent as null is
    removed, others stay; ``url`` cannot be removed, and a new ``url`` must send ``headers`` again or remove them
    (400). SecretError when the stored headers cannot be opened."""
    if "url" in changes and changes["url"] is None:
        raise InvalidRequest("url cannot be removed", param="url")
    headers = headers_of(box, record)
    current: dict[str, Any] = {"url": record.url, "headers": headers or None, "config": record.config}
    check_slug_move(current, changes, {"headers": headers} if headers else {}, hosts=("url",))
    changes = dict(changes)
    if changes.get("headers"):
        if "url" in changes and changes["url"] != record.url and any(map(looks_masked, changes["headers"].values())):
            raise InvalidRequest("headers hold a masked value, but this update changes url: send the values "
                                 "themselves again (a stored credential never follows a change of agent)",
                                 param="headers")
        changes["headers"] = sealed_headers.restore_masked(changes["headers"], headers, False, "agent")
    fields = applied(current, changes)
    check_fields(fields)
    return fields


def rebuilt(box: SecretBox, record: Agent, fields: dict[str, Any], card: Card | None, fetched_at: str) -> Agent:
    """``record`` with ``fields`` (from ``changed_fields``) and, when given, a newly read ``card``."""
    if card is None:
        card = Card(text=record.card, name=record.name, endpoint=record.endpoint,
                    protocol_version=record.protocol_version)
        fetched_at = record.card_fetched_at
    fresh = build(box, record.workspace_id, record.slug, fields, card, fetched_at)
    return msgspec.structs.replace(fresh, created_at=record.created_at, organisation_id=record.organisation_id)


def with_card(record: Agent, card: Card, fetched_at: str) -> Agent:
    """``record`` with a newly read and validated ``card``."""
    return msgspec.structs.replace(record, card=card.text, name=card.name, endpoint=card.endpoint,
                                   protocol_version=card.protocol_version, card_fetched_at=fetched_at)


def target(box: SecretBox, record: Agent) -> AgentTarget:
    """The data path's view of ``record``: its headers opened (SecretError when another key sealed them)."""
    return AgentTarget(slug=record.slug, workspace=record.workspace_id, endpoint=record.endpoint,
                       card=record.card.encode(), protocol_version=record.protocol_version,
                       headers=headers_of(box, record), config=record.config)
