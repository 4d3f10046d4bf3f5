"""Gateway-key routes: ``/v1/api-keys`` create and list, ``/v1/api-keys/{key_id}`` get and revoke, and rotate.

``POST /v1/api-keys`` ``{name, role?, workspace_id?, scopes?, rotation_period?, mcp_tools?}`` answers 201 with the
record and ``key``, the secret (shown only here and by rotate). ``role`` defaults to ``member``; a workspace that no
record names yet is created by naming it (the root key only: other admins act in their own workspace). A key creates,
rotates and revokes only keys within its own role and scopes, only a root key rotates or revokes a root key, and a
key may always revoke itself (403 naming the role or scope it lacks). Reading keys needs ``keys.read``; creating,
rotating and revoking another key ``keys.write``. Deleting a key revokes it: every worker and instance refuses it
within a second.
"""

from __future__ import annotations

import msgspec

from gateway.api.admin import PAGED, authorize, int_query, page, read_json, send_list, send_record
from gateway.controlplane.auth import check_access
from gateway.controlplane.keys import ApiKeys, KeyStore
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.schema.common import BodyDecoder


class KeyBody(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    role: str = "member"
    workspace_id: str | None = None
    scopes: list[str] | None = None
    rotation_period: int | str | None = None
    mcp_tools: list[str] | None = None


_body = BodyDecoder(KeyBody)


class KeyRoutes:
    def __init__(self, api_keys: ApiKeys, keys: KeyStore) -> None:
        """``api_keys`` stores the keys (every write reaches this worker's key cache at once, through the store's
        change listeners); ``keys`` authorises callers."""
        self.keys = api_keys
        self.lookup = keys

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [
            ("POST", "/v1/api-keys", self.create),
            ("GET", "/v1/api-keys", self.list),
            ("GET", "/v1/api-keys/{key_id}", self.get),
            ("DELETE", "/v1/api-keys/{key_id}", self.revoke),
            ("POST", "/v1/api-keys/{key_id}/rotate", self.rotate),
        ]

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.lookup, scope, "keys.write")
        body = await read_json(scope, receive, _body)
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        record, secret = await self.keys.create(
            name=body.name, role=body.role, workspace=workspace, organisation=caller.key.organisation,
            scopes=body.scopes, rotation_period=body.rotation_period, granter=caller.key, mcp_tools=body.mcp_tools,
        )
        await send_record(send, record.public(secret), 201)

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.lookup, scope, "keys.read", query=PAGED)
        records = await self.keys.list(caller.workspace)
        size = int_query(caller.query, "page_size", 0, 0)
        current = int_query(caller.query, "current_page", 0, 0)
        await send_list(send, [r.public() for r in page(records, size, current)], len(records))

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.lookup, scope, "keys.read")
        record = await self.keys.get(caller.workspace, scope["path_params"]["key_id"])
        await send_record(send, record.public())

    async def revoke(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.lookup, scope, None)
        key_id = scope["path_params"]["key_id"]
        if key_id != caller.key.key_id:  # a key may always revoke itself, keys.write or not
            check_access(caller.key, "keys.write")
        record = await self.keys.revoke(caller.workspace, key_id, caller.key)
        await send_record(send, {"id": record.id, "object": "api_key", "deleted": True})

    async def rotate(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.lookup, scope, "keys.write")
        record, secret = await self.keys.rotate(caller.workspace, scope["path_params"]["key_id"], caller.key)
        await send_record(send, record.public(secret))
