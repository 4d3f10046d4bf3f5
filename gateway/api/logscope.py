"""Whose request logs a key may read: the root admin key every workspace (or the one ``workspace=`` names), any
other key only its own workspace, and only with the ``logs.read`` scope. One rule for ``/v1/logs``,
``/v1/logs/stream`` and ``/v1/logs/aggregates``. ``workspace_id`` is read as ``workspace`` where a route checks its
query names (``gateway.api.admin.known_query``)."""

from __future__ import annotations

from typing import Collection

from gateway.api.admin import known_query, query_values
from gateway.controlplane.auth import authenticate
from gateway.controlplane.keys import KeyStore
from gateway.http.context import build_context
from gateway.http.errors import Forbidden, InvalidRequest
from gateway.http.types import Scope

#: names users try -> the name the log routes read
ALIASES = {"workspace_id": "workspace", "workspaceId": "workspace"}


class LogScope:
    """The rows a caller may see: one workspace, or every workspace (``workspace`` is then None); ``api_key`` is the
    caller's key, for readers that go on reading (a log stream checks it is still valid)."""

    __slots__ = ("workspace", "every_workspace", "api_key", "query")

    def __init__(self, workspace: str | None, every_workspace: bool, api_key: str = "",
                 query: dict[str, str] | None = None) -> None:
        self.workspace = workspace
        self.every_workspace = every_workspace
        self.api_key = api_key
        #: the request's query values (through ``known_query`` when the route named its query)
        self.query = query or {}

    def allows(self, workspace: str | None) -> bool:
        return self.every_workspace or workspace == self.workspace


async def log_scope(keys: KeyStore, scope: Scope, query: Collection[str] | None = None) -> LogScope:
    """Authenticate the caller (401 without a known key, 403 without ``logs.read``) and work out what it may read;
    a ``workspace`` query parameter narrows the root key's view and is a 403 from any other key when it names
    another workspace. With ``query`` (the names the route reads), any other name is a 400 naming it."""
    ctx = build_context(scope["headers"])
    record = await authenticate(keys, ctx, "logs.read")
    root = record.root
    values = query_values(scope)
    if query is not None:
        values = known_query(values, query, ALIASES)
    asked = values.get("workspace")
    if asked is not None:
        if not asked:
            raise InvalidRequest("workspace must not be empty", param="workspace")
        if not root and asked != ctx.workspace:
            raise Forbidden("this key reads only its own workspace's logs", param="workspace")
        return LogScope(asked, False, ctx.api_key or "", values)
    if root:
        return LogScope(None, True, ctx.api_key or "", values)
    return LogScope(ctx.workspace, False, ctx.api_key or "", values)
