"""Saved-config routes: ``/v1/configs`` create and list, ``/v1/configs/{config_id}`` get, update and delete.

``POST`` ``{name, config}`` validates the config as a request's config is validated (a fault is a 400 whose
``param`` is ``config.<JSON path>``) and answers 201 with the record and its ``id``; ``x-gateway-config: <id>``
then uses it. ``PUT`` takes ``name`` and/or ``config`` (validated the same way); every worker uses the new config
within a second. The provider slugs a config names must exist in the workspace, and it may not send a slug's
secrets to another host (``gateway.config.slug_hosts``), when it is saved as when it is used; so must the saved
guardrails it names, anywhere in its tree: a slug or guardrail deleted or changed later makes requests using the
config answer the same 400.

Credentials in a config are sealed at rest and masked in every answer (``gateway.controlplane.configs``); a masked
value sent back in a ``PUT`` keeps the stored secret. A record saved in clear by an older release is sealed the
first time any route or request reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import msgspec

from gateway.api.admin import Caller
from gateway.api.crud import RecordRoutes
from gateway.api.guardrails import check_saved_guardrails
from gateway.config.resolve import ConfigResolver
from gateway.config.validate import ConfigParser
from gateway.controlplane import configs
from gateway.controlplane.directory import RecordCache, RecordsNeeded, unusable
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.secrets import SecretError
from gateway.http.errors import InvalidRequest
from gateway.pipeline.prompted import loaded
from gateway.schema.common import BodyDecoder

if TYPE_CHECKING:
    from gateway.guardrails.runner import GuardrailRunner

_body = BodyDecoder(configs.ConfigBody)


class ConfigRoutes(RecordRoutes[configs.SavedConfig, configs.ConfigBody]):
    path = "/v1/configs"
    id_param = "config_id"
    object = "config"

    def __init__(self, keys: KeyStore, records: RecordCache,
                 parser: ConfigParser, resolver: ConfigResolver, guardrails: Callable[[], GuardrailRunner]) -> None:
        """``guardrails``: this worker's guardrail runner (made with the pipeline steps at first use), which
        resolves the saved guardrails a config names."""
        super().__init__(keys, records.configs, _body)
        self.records = records
        self.parser = parser
        self.resolver = resolver
        self.guardrails = guardrails

    async def build(self, caller: Caller, workspace: str, body: configs.ConfigBody) -> configs.SavedConfig:
        fields = configs.create_fields(body, self.parser.parse)
        await self._check_references(fields["config"], workspace)
        id = self.repo.new_id()
        fields.update(configs.sealed_fields(self.records.box, workspace, id, fields["config"]))
        return configs.SavedConfig(id=id, workspace_id=workspace, organisation_id=caller.key.organisation, **fields)

    async def _check_references(self, text: msgspec.Raw, workspace: str) -> None:
        """The config's slug references expanded and its saved guardrails resolved in ``workspace`` as a request's
        are: an unknown slug or guardrail, or a slug's secrets sent to another host, is a 400 whose ``param`` is
        ``config.<JSON path>``."""
        records, expand = self.records, self.resolver.refs.expand
        config = self.parser.parse(bytes(text))
        try:
            try:
                expand(config, workspace, records)
            except RecordsNeeded as needed:
                await loaded(records, needed, expand, config, workspace, records)
            await check_saved_guardrails(self.guardrails, config, workspace)
        except InvalidRequest as exc:
            raise InvalidRequest(exc.message, param=f"config.{exc.param}" if exc.param else "config") from None

    async def shown(self, record: configs.SavedConfig) -> Any:
        """The record as answers show it; one saved in clear by an older release is sealed now."""
        return (await configs.sealed_record(self.repo, self.records.box, record)).public()

    async def updated(self, record: configs.SavedConfig, workspace: str,
                      body: configs.ConfigBody) -> configs.SavedConfig:
        box = self.records.box
        changes = configs.update_fields(body, self.parser.parse, lambda: self._stored_secrets(record), record.config)
        if "config" in changes:
            await self._check_references(changes["config"], workspace)
        else:
            changes["config"] = msgspec.Raw(self._opened(record))
        changes.update(configs.sealed_fields(box, workspace, record.id, changes["config"]))
        return msgspec.structs.replace(record, **changes)

    def _stored_secrets(self, record: configs.SavedConfig) -> dict[configs.Path, Any]:
        try:
            return configs.stored_secrets(self.records.box, record)
        except SecretError as exc:
            raise unusable(record, exc) from None

    def _opened(self, record: configs.SavedConfig) -> bytes:
        try:
            return configs.opened(self.records.box, record)
        except SecretError as exc:
            raise unusable(record, exc) from None
