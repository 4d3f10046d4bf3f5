"""MCP server routes: ``/v1/mcp-servers`` create and list, ``/v1/mcp-servers/{slug}`` get, update and delete, and
``/v1/mcp-servers/{slug}/tools`` (the server's tools against the approved pins) with ``.../tools/approve``.

``POST`` ``{slug, url, name?, headers?, allowed_tools?, workspace_id?}`` checks the URL's address through the SSRF
guard, reads the server's tools (``read_tools``, the data path's MCP client) and pins every one as listed, then
stores the record: a server that cannot be read is that error (502, 504, 403) and nothing is stored. ``PUT``
changes the keys it names (null removes one; ``slug`` cannot change); a new ``url`` or ``headers`` is read again
the same way, and the pins stay as approved. Approving re-reads the server, pins the named tools' current
definitions and logs one line per change with its diff (logger ``gateway.admin``, at WARNING so the default
logging shows it). docs/control-plane.md, "MCP servers".
"""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

import msgspec

from gateway.api.admin import ADMIN_BODY_LIMIT, Caller, authorize, send_list
from gateway.api.crud import SlugRoutes
from gateway.controlplane import mcp_pins, mcp_servers
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.records import now_iso
from gateway.controlplane.secrets import SecretError
from gateway.http.body import read_request_body
from gateway.http.errors import Conflict, Forbidden, GatewayError, InvalidRequest
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.mcp.target import SEPARATOR, ServerTarget
from gateway.schema.common import BodyDecoder

log = logging.getLogger("gateway.admin")

#: the data path's read of a server's ``tools/list`` (every page), raising a GatewayError when it cannot be read
ReadTools = Callable[[ServerTarget], Awaitable[list[dict[str, Any]]]]
#: the SSRF guard's check of a host and port (``PinnedResolver.check``): 403 for a refused address
CheckHost = Callable[[str, int], Awaitable[None]]


class McpServerBody(mcp_servers.McpServerFields, forbid_unknown_fields=True):
    workspace_id: str | None = None


class ApproveBody(msgspec.Struct, forbid_unknown_fields=True):
    """``tools``: the names to approve (absent or null: every pending tool)."""

    tools: list[str] | None = None
    workspace_id: str | None = None


_body = BodyDecoder(McpServerBody)
_approve_body = BodyDecoder(ApproveBody)


class McpServerRoutes(SlugRoutes[mcp_servers.McpServer, McpServerBody]):
    path = "/v1/mcp-servers"
    object = "mcp_server"
    instead = "create a new MCP server"

    def __init__(self, keys: KeyStore, records: RecordCache, read_tools: ReadTools, check_host: CheckHost) -> None:
        super().__init__(keys, records.mcp_servers, _body)
        self.records = records
        self.read_tools = read_tools
        self.check_host = check_host

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        tools = f"{self.path}/{{{self.id_param}}}/tools"
        return [*super().routes(), ("GET", tools, self.tools), ("POST", f"{tools}/approve", self.approve)]

    # -- reading the server ----------------------------------------------------------------------------------

    def _target(self, record: mcp_servers.McpServer) -> ServerTarget:
        try:
            return mcp_servers.target(self.records.box, record)
        except SecretError as exc:
            raise GatewayError(f"MCP server '{record.slug}' cannot be used: {exc}", param="slug") from None

    async def _listed(self, record: mcp_servers.McpServer) -> list[dict[str, Any]]:
        """The server's tools as it lists them now, after the SSRF guard passed its address."""
        parts = urlsplit(record.url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        try:
            await self.check_host(parts.hostname or "", port)
        except Forbidden as exc:
            raise Forbidden(exc.message, param="url") from None
        return await self.read_tools(self._target(record))

    # -- the record routes -----------------------------------------------------------------------------------

    async def build(self, caller: Caller, workspace: str, body: McpServerBody) -> mcp_servers.McpServer:
        slug, fields = self.created_fields(body)
        if SEPARATOR in slug:
            raise InvalidRequest(f"slug must not hold {SEPARATOR!r}: on /v1/mcp tools are named "
                                 f"<slug>{SEPARATOR}<tool>, split at the first one", param="slug")
        record = mcp_servers.build(self.records.box, workspace, slug, fields)
        if await self.repo.lookup(workspace, slug) is not None:  # before reading the server
            raise Conflict(f"MCP server '{slug}' already exists in this workspace", param="slug")
        pins = mcp_pins.pins_of(await self._listed(record), now_iso())
        return msgspec.structs.replace(record, organisation_id=caller.key.organisation, tools=pins)

    async def shown(self, record: mcp_servers.McpServer) -> Any:
        return record.public()

    async def updated(self, record: mcp_servers.McpServer, workspace: str,
                      body: McpServerBody) -> mcp_servers.McpServer:
        changes = self.changed_fields(body, record.slug)
        try:
            fresh = mcp_servers.updated(self.records.box, record, changes)
        except SecretError as exc:
            raise GatewayError(f"MCP server '{record.slug}' cannot be updated: {exc}", param="slug") from None
        if fresh.url != record.url or "headers" in changes:
            await self._listed(fresh)  # the new address or credentials must reach the server; pins stay
        return fresh

    # -- tools -------------------------------------------------------------------------------------------------

    async def tools(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.read_scope, query=("workspace_id",))
        record = await self.repo.get(caller.workspace, self.record_id(scope))
        try:
            listed: list[dict[str, Any]] | None = await self._listed(record)
            problem = None
        except GatewayError as exc:
            listed, problem = None, exc.message
        views = mcp_pins.tool_views(record, listed)
        if problem is None:
            await send_list(send, views)
        else:
            await send_list(send, views, upstream_error=problem)

    async def approve(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.write_scope, query=("workspace_id",))
        raw = await read_request_body(scope, receive, ADMIN_BODY_LIMIT)
        body = _approve_body.decode(raw) if raw.strip() else ApproveBody()
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        slug = self.record_id(scope)
        read = await self.repo.get(workspace, slug)
        listed = await self._listed(read)
        approvals: list[mcp_servers.Approval] = []
        before: list[dict[str, Any]] = []

        async def approved(current: mcp_servers.McpServer) -> mcp_servers.McpServer | None:
            # run again on the record as stored when another change (an approval of other tools) landed first
            nonlocal read, listed, approvals, before
            if (current.url, current.sealed) != (read.url, read.sealed):  # another server now: read it again
                read, listed = current, await self._listed(current)
            pins, approvals, before = mcp_pins.approve(current, listed, body.tools, caller.key.key_id, now_iso())
            return mcp_servers.with_approvals(current, pins, approvals) if approvals else None

        record = await self.repo.update(workspace, slug, approved)
        if approvals:
            for approval, view in zip(approvals, before):
                log.warning("mcp tool approved: %s", json.dumps({
                    "event": "mcp_tool_approved", "workspace_id": record.workspace_id, "server": record.slug,
                    "tool": approval.tool, "change": approval.change, "by_key_id": approval.by_key_id,
                    "before_digest": approval.before_digest, "after_digest": approval.after_digest,
                    "diff": view["diff"],
                }, sort_keys=True, default=str))
        await send_list(send, mcp_pins.tool_views(record, listed))
