"""Provider-slug routes: ``/v1/providers`` create and list, ``/v1/providers/{slug}`` get, update and delete.

``POST`` ``{slug, provider, name?, api_key?, custom_host?, ...any provider or cloud credential key of the config}``
answers 201 with the record (secrets masked); a slug the workspace already has is a 409. ``PUT`` changes the keys
it names (null removes one; ``slug`` cannot change). A path slug may carry its ``@``.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.api.admin import PAGED, Caller, provider_query
from gateway.api.crud import SlugRoutes
from gateway.controlplane import providers
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.secrets import SecretError
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.schema.common import BodyDecoder


class ProviderBody(providers.ProviderFields, forbid_unknown_fields=True):
    workspace_id: str | None = None


_body = BodyDecoder(ProviderBody)


class ProviderRoutes(SlugRoutes[providers.ProviderSlug, ProviderBody]):
    path = "/v1/providers"
    object = "provider"
    instead = "create a new slug"
    list_query = (*PAGED, "provider")

    def __init__(self, keys: KeyStore, records: RecordCache) -> None:
        super().__init__(keys, records.slugs, _body)
        self.records = records

    async def build(self, caller: Caller, workspace: str, body: ProviderBody) -> providers.ProviderSlug:
        slug, fields = self.created_fields(body)
        record = providers.build(self.records.box, workspace, slug, fields)
        return msgspec.structs.replace(record, organisation_id=caller.key.organisation)

    def matches(self, query: dict[str, str]) -> Callable[[providers.ProviderSlug], bool] | None:
        wanted = provider_query(query)
        return (lambda r: r.provider == wanted) if wanted else None

    async def shown(self, record: providers.ProviderSlug) -> Any:
        return record.public()

    async def updated(self, record: providers.ProviderSlug, workspace: str,
                      body: ProviderBody) -> providers.ProviderSlug:
        slug = record.slug
        changes = self.changed_fields(body, slug)
        if "provider" in changes and changes["provider"] is None:
            raise InvalidRequest("provider cannot be removed", param="provider")
        try:
            return providers.updated(self.records.box, record, changes)
        except SecretError as exc:
            raise GatewayError(f"provider slug '@{slug}' cannot be updated: {exc}", param="slug") from None
