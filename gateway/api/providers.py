"""Provider-slug routes: ``/v1/providers`` create and list, ``/v1/providers/{slug}`` get, update and delete.

``POST`` ``{slug, provider, name?, api_key?, custom_host?, ...any provider or cloud credential key of the config}``
answers 201 with the record (secrets masked); a slug the workspace already has is a 409. ``PUT`` changes the keys
it names (null removes one; ``slug`` cannot change). A path slug may carry its ``@``.
"""

from __future__ import annotations

import msgspec

from gateway.api.admin import PAGED, authorize, int_query, page, provider_query, read_json, send_list, send_record
from gateway.controlplane import providers
from gateway.controlplane.secrets import SecretError
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.runtime import Runtime
from gateway.schema.common import BodyDecoder


class ProviderBody(providers.ProviderFields, forbid_unknown_fields=True):
    workspace_id: str | None = None


_body = BodyDecoder(ProviderBody)


def _fields(body: ProviderBody) -> dict:
    fields = msgspec.structs.asdict(body)
    fields.pop("workspace_id", None)
    return {k: msgspec.to_builtins(v) for k, v in fields.items() if v is not msgspec.UNSET}


class ProviderRoutes:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.repo = runtime.records.slugs

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [
            ("POST", "/v1/providers", self.create),
            ("GET", "/v1/providers", self.list),
            ("GET", "/v1/providers/{slug}", self.get),
            ("PUT", "/v1/providers/{slug}", self.update),
            ("DELETE", "/v1/providers/{slug}", self.delete),
        ]

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        body = await read_json(scope, receive, _body)
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        fields = _fields(body)
        if not fields.get("slug"):
            raise InvalidRequest("slug is required", param="slug")
        slug = providers.normalise_slug(fields.pop("slug"))
        record = providers.build(self.runtime.records.box, workspace, slug, fields)
        record = msgspec.structs.replace(record, organisation_id=caller.key.organisation)
        record = await self.repo.create(record)
        self.runtime.records_changed()
        await send_record(send, record.public(), 201)

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope, query=(*PAGED, "provider"))
        wanted = provider_query(caller.query)
        records = await self.repo.list(caller.workspace)
        if wanted:
            records = [r for r in records if r.provider == wanted]
        size = int_query(caller.query, "page_size", 0, 0)
        current = int_query(caller.query, "current_page", 0, 0)
        await send_list(send, [r.public() for r in page(records, size, current)], len(records))

    def _slug(self, scope: Scope) -> str:
        return providers.normalise_slug(scope["path_params"]["slug"])

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        record = await self.repo.get(caller.workspace, self._slug(scope))
        await send_record(send, record.public())

    async def update(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        body = await read_json(scope, receive, _body)
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        slug = self._slug(scope)
        record = await self.repo.get(workspace, slug)
        changes = _fields(body)
        given = changes.pop("slug", None)
        if given is not None and providers.normalise_slug(given) != slug:
            raise InvalidRequest("slug cannot be changed; create a new slug instead", param="slug")
        if "provider" in changes and changes["provider"] is None:
            raise InvalidRequest("provider cannot be removed", param="provider")
        try:
            record = providers.updated(self.runtime.records.box, record, changes)
        except SecretError as exc:
            raise GatewayError(f"provider slug '@{slug}' cannot be updated: {exc}", param="slug") from None
        record = await self.repo.replace(record)
        self.runtime.records_changed()
        await send_record(send, record.public())

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        record = await self.repo.delete(caller.workspace, self._slug(scope))
        self.runtime.records_changed()
        await send_record(send, {"id": record.id, "object": "provider", "deleted": True})
