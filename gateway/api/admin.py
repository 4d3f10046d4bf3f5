"""What every control-plane route shares: the caller's key and workspace, JSON bodies, query values, list answers.

Admin routes take an ``admin`` gateway key (``x-gateway-api-key`` or ``Authorization: Bearer``); a ``member`` key
gets 403. Routes members may use (prompt render, models) name the scope they need instead. A caller acts in its
key's workspace. The bootstrap admin key (``root``) may name another workspace (``workspace_id`` in the query or
body); any other key naming a workspace not its own gets the same 404 as a missing record, so one workspace never
learns what another holds.
"""

from __future__ import annotations

from typing import Any, Sequence, TypeVar
from urllib.parse import parse_qsl

import msgspec

from gateway.api.runtime import Runtime
from gateway.controlplane.keys import KeyRecord, missing_scope
from gateway.http.body import read_request_body
from gateway.http.context import RequestContext, build_context
from gateway.http.errors import Forbidden, InvalidRequest, NotFound, Unauthorized
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.schema.common import BodyDecoder

T = TypeVar("T")

_encode = msgspec.json.encode
ADMIN_BODY_LIMIT = 1024 * 1024  # control-plane bodies (configs, prompts, policies) stay far below this


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


def _bearer_or_key(ctx: RequestContext) -> str | None:
    return ctx.api_key or ctx.bearer


async def authorize(runtime: Runtime, scope: Scope, *, admin: bool = True, needs: str | None = None) -> Caller:
    """The caller of a control-plane route; 401 without a known key, 403 when ``admin`` and the key is a member,
    or when the key lacks the scope ``needs``."""
    ctx = build_context(scope["headers"])
    key = _bearer_or_key(ctx)
    if not key:
        raise Unauthorized("missing gateway key: send x-gateway-api-key", param="x-gateway-api-key")
    record = await runtime.keys.lookup(key)
    if record is None:
        raise Unauthorized("unknown gateway key", param="x-gateway-api-key")
    if admin and record.role != "admin":
        raise Forbidden("this route needs an admin gateway key; this key's role is member",
                        param="x-gateway-api-key")
    if needs is not None and needs not in record.scopes:
        raise missing_scope(needs)
    ctx.workspace = record.workspace
    return Caller(ctx, record, query_values(scope))


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
