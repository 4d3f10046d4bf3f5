"""MCP servers: a remote tool server the workspace's keys reach through ``/v1/mcp``, stored per workspace with the
headers the gateway sends it sealed at rest, its tool allow-list and the tool definitions an admin approved.

What a user sees (routes, fields, masking, pinning): docs/control-plane.md, "MCP servers". This module owns the
record and its rules:

- ``url`` is a remote server's Streamable HTTP endpoint, ``http://`` or ``https://`` only: the gateway never starts a
  local server or runs a command (a ``stdio:`` or other URL is a 400), and the URL's form passes the SSRF guard's
  rules (``gateway.upstream.ssrf.check_url``; the address is checked at create and at every connection by the
  routes and the data path).
- ``headers`` (a bearer token, an API key header) are sealed together as one JSON object, bound to the record's
  kind, workspace and slug, and shown masked as provider slugs' secrets are (``sealed_headers``). Their names
  are RFC 9110 tokens other than those the gateway sets itself or that are hop-by-hop; values hold no CR, LF or
  NUL. A change of ``url`` must send them again or remove them: a credential never follows a move silently
  (``secret_hosts.check_slug_move``).
- ``tools`` are the approved definitions (``gateway.schema.mcp_target.ToolPin``, compared by ``tool_digest``);
  ``approvals`` the newest ``MAX_APPROVALS`` approvals, oldest first.

``target`` opens a record into the ``ServerTarget`` the data path reads (``gateway.controlplane.directory`` caches
them per worker).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateway.controlplane import sealed_headers
from gateway.controlplane.records import Entity, applied
from gateway.controlplane.secret_hosts import check_slug_move
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest
from gateway.schema import header_values
from gateway.schema.mcp_target import ServerTarget, ToolPin
from gateway.upstream.ssrf import check_url

KIND = "mcp_server"
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET
MAX_URL = 2048
MAX_NAME = 255
MAX_CONFIG = 64 * 1024
MAX_HEADERS = 32
MAX_HEADER_VALUE = 8192
MAX_ALLOWED_TOOLS = 1000
MAX_TOOL_NAME = 128
MAX_APPROVALS = 50
#: RFC 9110 section 5.6.2: a field name is a token
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: headers a server's record may not set: hop-by-hop ones (RFC 9110 section 7.6.1) and those the gateway writes
#: itself on every request to a server (framing, content negotiation, the MCP session and per-request headers)
RESERVED_HEADERS = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    "proxy-authorization", "proxy-authenticate", "host", "content-length", "content-type", "content-encoding",
    "accept", "accept-encoding", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
    "last-event-id",
})
NOT_REMOTE = ("url must be an http:// or https:// URL of a remote MCP server: the gateway speaks Streamable HTTP to "
              "remote servers only and never starts a local server or runs a command")
CHANGES = ("added", "changed", "removed")


class McpServerFields(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/mcp-servers`` and ``PUT /v1/mcp-servers/{slug}``: a key left out is unchanged by a
    PUT, a key sent as null is removed."""

    slug: str | None | Unset = UNSET
    url: str | None | Unset = UNSET
    name: str | None | Unset = UNSET
    headers: dict[str, str] | None | Unset = UNSET
    allowed_tools: list[str] | None | Unset = UNSET
    #: the config whose guardrails judge the server's tool calls (a saved config's id or inline JSON)
    config: str | None | Unset = UNSET


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    """One approved change of a tool's pinned definition (``before_digest`` None: added; ``after_digest`` None:
    removed)."""

    at: str
    by_key_id: str
    tool: str
    change: str
    before_digest: str | None = None
    after_digest: str | None = None


class McpServer(Entity, kw_only=True):
    """A stored MCP server: ``id`` is the slug (unique within its workspace)."""

    object: str = "mcp_server"
    slug: str
    url: str
    name: str | None = None
    #: the headers as one sealed JSON object (None when there are none)
    sealed: str | None = None
    #: header name -> its masked value, for answers
    masked: dict[str, str] = {}
    #: the tool names keys may see and call (None: every approved tool)
    allowed_tools: list[str] | None = None
    #: the config whose guardrails judge its tool calls when a request names none
    config: str | None = None
    #: the approved tool definitions by name
    tools: dict[str, ToolPin] = {}
    approvals: list[Approval] = []

    def public(self) -> dict[str, Any]:
        """The record as the API answers it: headers masked, the sealed blob left out, pins by name."""
        return {
            "id": self.id, "object": self.object, "slug": self.slug, "url": self.url, "name": self.name,
            "headers": dict(self.masked), "allowed_tools": self.allowed_tools, "config": self.config,
            "tools": [{"name": pin.name, "digest": pin.digest, "approved_at": pin.approved_at}
                      for pin in sorted(self.tools.values(), key=lambda p: p.name)],
            "approvals": [msgspec.to_builtins(a) for a in self.approvals],
            "workspace_id": self.workspace_id, "organisation_id": self.organisation_id,
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
        }


def _context(workspace: str, slug: str) -> str:
    return f"{KIND}/{workspace}/{slug}"


def check_server_url(url: str) -> str:
    """``url`` when it is a remote server's http(s) URL in the SSRF guard's form; else a 400 naming ``url``."""
    if not url:
        raise InvalidRequest("url must not be empty", param="url")
    if len(url) > MAX_URL:
        raise InvalidRequest(f"url must be at most {MAX_URL} characters", param="url")
    if re.search(r"[\s\x00-\x1f\x7f]", url):
        raise InvalidRequest(f"{NOT_REMOTE} (it holds whitespace or control characters)", param="url")
    scheme, colon, _ = url.partition(":")
    if not colon or scheme.lower() not in ("http", "https") or not url[len(scheme) + 1:].startswith("//"):
        shown = f"scheme {scheme.lower()!r}" if colon and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme) \
            else "no scheme"
        raise InvalidRequest(f"{NOT_REMOTE} (got {shown})", param="url")
    check_url(url, "url")
    return url


def check_headers(headers: dict[str, str], reserved: frozenset[str] = RESERVED_HEADERS) -> None:
    """400 naming ``headers`` or the header unless ``headers`` are at most ``MAX_HEADERS`` sendable headers (none
    of ``reserved``: an agent's record has its own list)."""
    if len(headers) > MAX_HEADERS:
        raise InvalidRequest(f"headers may hold at most {MAX_HEADERS} headers, got {len(headers)}", param="headers")
    seen: set[str] = set()
    for name, value in headers.items():
        where = f"headers.{name}"
        if not TOKEN.fullmatch(name):
            raise InvalidRequest(f"header name {name!r} is not a valid HTTP field name (RFC 9110 token characters)",
                                 param="headers")
        lower = name.lower()
        if lower in reserved:
            raise InvalidRequest(f"header {name!r} cannot be set: the gateway writes it itself or it is hop-by-hop",
                                 param=where)
        if lower in seen:
            raise InvalidRequest(f"header {name!r} is given twice (header names are case-insensitive)", param=where)
        seen.add(lower)
        if not value:
            raise InvalidRequest(f"header {name!r} must not be empty", param=where)
        if len(value) > MAX_HEADER_VALUE:
            raise InvalidRequest(f"header {name!r} must be at most {MAX_HEADER_VALUE} characters", param=where)
        if header_values.has_breaks(value):
            raise InvalidRequest(f"{where} {header_values.MESSAGE}", param=where)


def check_allowed_tools(names: list[str]) -> None:
    """400 naming ``allowed_tools`` (or the item) unless ``names`` are at most ``MAX_ALLOWED_TOOLS`` unique names of
    1..``MAX_TOOL_NAME`` characters."""
    if len(names) > MAX_ALLOWED_TOOLS:
        raise InvalidRequest(f"allowed_tools may name at most {MAX_ALLOWED_TOOLS} tools, got {len(names)}",
                             param="allowed_tools")
    seen: set[str] = set()
    for i, name in enumerate(names):
        where = f"allowed_tools[{i}]"
        if not 1 <= len(name) <= MAX_TOOL_NAME:
            raise InvalidRequest(f"{where} must be 1..{MAX_TOOL_NAME} characters", param=where)
        if name in seen:
            raise InvalidRequest(f"{where} names {name!r} again", param=where)
        seen.add(name)


def check_config_ref(config: str) -> None:
    """400 naming ``config`` unless it is a saved config's id or a JSON object (the guardrail lists are checked
    when a call uses it, as a request's ``x-gateway-config`` is)."""
    text = config.strip()
    if not text or len(text) > MAX_CONFIG:
        raise InvalidRequest(f"config must be a saved config's id or a JSON object of at most {MAX_CONFIG} "
                             "characters", param="config")
    if text.startswith("{"):
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            raise InvalidRequest(f"config is not valid JSON: {exc}", param="config") from None
        if not isinstance(value, dict):
            raise InvalidRequest("config must be a JSON object", param="config")
    elif not re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", text):
        raise InvalidRequest(f"config must be a saved config's id or a JSON object, got {text[:40]!r}",
                             param="config")


def _check(fields: dict[str, Any]) -> None:
    if fields.get("url") is None:
        raise InvalidRequest("url is required", param="url")
    check_server_url(fields["url"])
    name = fields.get("name")
    if name is not None and len(name) > MAX_NAME:
        raise InvalidRequest(f"name must be at most {MAX_NAME} characters", param="name")
    if fields.get("headers") is not None:
        check_headers(fields["headers"])
    if fields.get("allowed_tools") is not None:
        check_allowed_tools(fields["allowed_tools"])
    if fields.get("config") is not None:
        check_config_ref(fields["config"])


def build(box: SecretBox, workspace: str, slug: str, fields: dict[str, Any]) -> McpServer:
    """A record from the validated ``fields`` (the body's keys that are set; ``url`` required), without pins."""
    _check(fields)
    sealed, masked = sealed_headers.sealed(box, _context(workspace, slug), fields.get("headers") or {})
    return McpServer(
        id=slug, slug=slug, url=fields["url"], name=fields.get("name"), workspace_id=workspace, sealed=sealed,
        masked=masked, allowed_tools=fields.get("allowed_tools"),
        config=fields.get("config"),
    )


def headers_of(box: SecretBox, record: McpServer) -> dict[str, str]:
    """The record's headers, opened (SecretError when another key sealed them)."""
    return sealed_headers.opened(box, _context(record.workspace_id, record.slug), record.sealed)


def updated(box: SecretBox, record: McpServer, changes: dict[str, Any]) -> McpServer:
    """``record`` with ``changes`` applied: a given key replaces (``headers`` as a whole), a key sent as null is
    removed, others stay; ``slug`` cannot change and ``url`` cannot be removed. A new ``url`` must send
    ``headers`` again or remove them (400). Pins and approvals stay as they are."""
    if "url" in changes and changes["url"] is None:
        raise InvalidRequest("url cannot be removed", param="url")
    headers = headers_of(box, record)
    current: dict[str, Any] = {"url": record.url, "name": record.name, "headers": headers or None,
                               "allowed_tools": record.allowed_tools, "config": record.config}
    check_slug_move(current, changes, {"headers": headers} if headers else {}, hosts=("url",))
    changes = dict(changes)
    if changes.get("headers"):
        changes["headers"] = sealed_headers.restore_masked(changes["headers"], headers,
                                                           "url" in changes and changes["url"] != record.url, "server")
    fresh = build(box, record.workspace_id, record.slug, applied(current, changes))
    return msgspec.structs.replace(fresh, created_at=record.created_at, organisation_id=record.organisation_id,
                                   tools=record.tools, approvals=record.approvals)


def target(box: SecretBox, record: McpServer) -> ServerTarget:
    """The data path's view of ``record``: its headers opened (SecretError when another key sealed them)."""
    allowed = None if record.allowed_tools is None else tuple(record.allowed_tools)
    return ServerTarget(slug=record.slug, workspace=record.workspace_id, url=record.url,
                        headers=headers_of(box, record), allowed_tools=allowed, pins=dict(record.tools),
                        config=record.config)


def with_approvals(record: McpServer, tools: dict[str, ToolPin], approvals: list[Approval]) -> McpServer:
    """``record`` with ``tools`` as its pins and ``approvals`` appended to its history (the newest
    ``MAX_APPROVALS`` kept)."""
    history = [*record.approvals, *approvals][-MAX_APPROVALS:]
    return msgspec.structs.replace(record, tools=tools, approvals=history)
