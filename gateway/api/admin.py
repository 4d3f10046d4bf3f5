"""What every control-plane route shares: the caller's key and workspace, JSON bodies, query values, list answers.

Callers authenticate as on every route (``gateway.controlplane.auth``). Admin routes need an ``admin`` key (a
``member`` key gets 403) holding the scope of the route's record family (``<family>.read`` to read,
``<family>.write`` to change; ``gateway.controlplane.keys.SCOPES``); routes members may use (prompt render, models)
name only their scope. A caller acts in its key's workspace. The bootstrap admin key (``root``) may name another
workspace (``workspace_id`` in the query or body); any other key naming a workspace not its own gets the same 404
as a missing record, so one workspace never learns what another holds.

Query parameters: each list route names the parameters it reads (``authorize(..., query=NAMES)``, or
``known_query`` for routes that authorise otherwise). A name the route does not read is a 400 naming it (and the
names it does), never silently ignored; the aliases users try (``QUERY_ALIASES``: ``workspace`` for
``workspace_id``...) are read as the name they stand for. A deep-object name (``metadata[key]``, ``include[]``)
counts as its base name.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Mapping, Protocol, Sequence, TypeVar
from urllib.parse import parse_qsl

import msgspec

from gateway.controlplane.auth import authenticate
from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.http.body import read_request_body
from gateway.http.context import RequestContext, build_context
from gateway.http.errors import InvalidRequest, NotFound
from gateway.http.respond import send_json
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.providers.registry import is_known, provider_names
from gateway.schema.common import BodyDecoder

T = TypeVar("T")

_encode = msgspec.json.encode
ADMIN_BODY_LIMIT = 1024 * 1024  # control-plane bodies (configs, prompts, policies) stay far below this
#: the query of a paged control-plane list: the workspace (root key) and the page
PAGED = ("workspace_id", "page_size", "current_page")

#: an MCP server slug as a log query names it (``mcp:<slug>``: the provider of its tool calls' records)
MCP_SERVER_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: the provider of a direct guardrail check's request record (``gateway.api.guardrail_check``)
GUARDRAILS = "guardrails"


class Mount(Protocol):
    """What route modules mount their routes on (the gateway app): an ASGI app that routes ``add``-ed handlers."""

    def add(self, method: str, path: str, handler: ASGIApp) -> None: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...
#: names users try -> the query name the gateway reads (used where the route reads that name)
QUERY_ALIASES: Mapping[str, str] = {
    "workspace": "workspace_id", "workspaceId": "workspace_id", "pageSize": "page_size",
    "currentPage": "current_page",
}


class Caller:
    """An authenticated control-plane request: its context, key record and query values."""

    __slots__ = ("ctx", "key", "query")

    def __init__(self, ctx: RequestContext, key: KeyRecord, query: dict[str, str]) -> None:
        self.ctx = ctx
        self.key = key
        self.query = query

    @property
    def workspace(self) -> str:
        """The workspace this request acts in: ``workspace_id`` from the query when the key may choose it."""
        return self.workspace_for(self.query.get("workspace_id"))

    def workspace_for(self, requested: str | None) -> str:
        """``requested`` when the key may act there (its own, or any for the root key), else a 404."""
        own = self.key.workspace
        if not requested or requested == own:
            return own
        if self.key.root:
            return requested
        raise NotFound(f"no workspace '{requested}'", param="workspace_id")


def query_values(scope: Scope) -> dict[str, str]:
    """The query string as name -> value (the last of repeated names wins)."""
    raw = scope.get("query_string") or b""
    return dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True)) if raw else {}


async def own_workspace_key(keys: KeyStore, ctx: RequestContext, scope: Scope, needed: str, routes: str
                            ) -> KeyRecord:
    """The caller's key holding the scope ``needed``, for routes that serve only the key's own workspace (the data
    plane's MCP and agent endpoints): a ``workspace_id`` query naming another (even for the root key) is the 404 of
    a workspace it cannot see, its message saying that ``routes`` serve the key's own."""
    key = await authenticate(keys, ctx, needed)
    named = query_values(scope).get("workspace_id")
    if named and named != key.workspace:
        raise NotFound(f"no workspace '{named}' ({routes} serve the key's own workspace)", param="workspace_id")
    return key


def known_query(query: Mapping[str, str], known: Collection[str],
                aliases: Mapping[str, str] = QUERY_ALIASES) -> dict[str, str]:
    """``query`` as the route reads it: an alias (of a name in ``known``) renamed to that name; any other name
    not in ``known`` is a 400 naming it. A name given twice, as itself and as an alias, must have one value."""
    out: dict[str, str] = {}
    for name, value in query.items():
        if name.split("[", 1)[0] in known:
            out[name] = value
            continue
        meant = aliases.get(name)
        if meant is None or meant not in known:
            raise InvalidRequest(f"unknown query parameter {name!r}: this route reads {', '.join(sorted(known))}",
                                 param=name)
        if query.get(meant, value) != value:
            raise InvalidRequest(f"{name} and {meant} name the same filter with different values: send one",
                                 param=name)
        out[meant] = value
    return out


def provider_query(query: Mapping[str, str], slugs: Collection[str] = (), name: str = "provider",
                   mcp: bool = False) -> str | None:
    """A query value that must be a provider name (or, when ``slugs`` are given, one of them, with or without its
    ``@``; with ``mcp``, the provider of a record that is no model call: an MCP tool call's, ``mcp:<server slug>``,
    an agent call's, ``agent:<agent slug>``, or a direct guardrail check's, ``guardrails``); None when absent.
    Anything else is a 400 naming it."""
    wanted = query.get(name)
    if not wanted:
        return None
    if is_known(wanted) or (wanted[1:] if wanted.startswith("@") else wanted) in slugs:
        return wanted
    if mcp and (wanted == GUARDRAILS or (wanted.startswith("mcp:") and MCP_SERVER_SLUG.fullmatch(wanted[4:]))
                or (wanted.startswith("agent:") and MCP_SERVER_SLUG.fullmatch(wanted[6:]))):
        return wanted
    also = " or a provider slug of this workspace" if slugs else ""
    if mcp:
        also += f" or mcp:<MCP server slug> or agent:<agent slug> or {GUARDRAILS}"
    raise InvalidRequest(f"unknown provider {wanted!r} in {name}; accepted: {', '.join(provider_names())}{also}",
                         param=name)


async def authorize(keys: KeyStore, scope: Scope, needs: str | None, *, admin: bool = True,
                    query: Collection[str] | None = None) -> Caller:
    """The caller of a control-plane route (``gateway.controlplane.auth.authenticate``): 401 without a known key,
    403 when ``admin`` and the key is a member, or when the key lacks the scope ``needs``. With ``query`` (the names
    the route reads), the query is checked by ``known_query`` and read through its aliases."""
    ctx = build_context(scope["headers"])
    record = await authenticate(keys, ctx, needs, admin=admin)
    values = query_values(scope)
    return Caller(ctx, record, values if query is None else known_query(values, query))


async def read_json(scope: Scope, receive: Receive, decoder: BodyDecoder[T]) -> T:
    """The request body decoded with ``decoder``: 400 naming the field when it does not fit."""
    body = await read_request_body(scope, receive, ADMIN_BODY_LIMIT)
    return decoder.decode(body)


def int_query(query: dict[str, str], name: str, default: int, low: int, high: int | None = None) -> int:
    """An integer query value within ``low..high``; 400 naming it otherwise."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be an integer, got {raw!r}", param=name) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidRequest(f"{name} must be {bound}, got {value}", param=name)
    return value


def choice_query(query: dict[str, str], name: str, choices: Sequence[str]) -> str | None:
    """A query value that must be one of ``choices`` (None when absent); 400 naming it otherwise."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    if raw not in choices:
        raise InvalidRequest(f"{name} must be one of {', '.join(choices)}, got {raw!r}", param=name)
    return raw


def page(items: list[T], page_size: int | None, current_page: int) -> list[T]:
    """One page of ``items`` (pages counted from 0); all of them when ``page_size`` is None or 0."""
    if not page_size:
        return items
    start = current_page * page_size
    return items[start:start + page_size]


async def send_record(send: Send, record: Any, status: int = 200) -> None:
    """One record (a Struct or a dict) as the JSON answer."""
    await send_json(send, status, _encode(record))


async def send_list(send: Send, data: Sequence[Any], total: int | None = None, **extra: Any) -> None:
    """The list envelope ``{"object": "list", "data": [...], "total": n}`` (plus ``extra`` members)."""
    doc: dict[str, Any] = {"object": "list", "data": data, "total": len(data) if total is None else total}
    doc.update(extra)
    await send_json(send, 200, _encode(doc))
