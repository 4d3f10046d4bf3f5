"""Saved-guardrail routes: ``/v1/guardrails`` create and list, ``/v1/guardrails/{guardrail_id}`` get, update
and delete (admin keys; records of the caller's workspace).

``POST`` takes ``{name, checks, deny, async, on_fail, on_success, workspace_id}`` validated as a config's items are
(a bad field is a 400 naming it, e.g. ``checks[0].parameters.rule``) and answers 201 with the record. ``PUT`` takes
any of those fields (``checks`` replaces the list) and validates the merged record. ``GET /v1/guardrails`` pages
with ``current_page``, ``page_size`` and ``ids`` (see ``gateway.guardrails.saved``). Configs name a saved guardrail
by its id; every worker sees a change within about GATEWAY_STATE_WATCH_INTERVAL_MS.

Credentials in the checks (webhook header values, a JWT check's ``secret``) are sealed at rest and masked in every
answer (``gateway.guardrails.saved``); a masked value sent back in a ``PUT`` or ``POST`` keeps the stored one. A
record saved in clear by an older release is sealed the first time any route or request reads it.

``check_saved_guardrails`` resolves the saved guardrails a config names (for ``POST /v1/configs/validate`` and saved
configs) as a request would. The guardrails package (every built-in check) is imported at the first call of one of
these, not when they are mounted: a worker that never uses guardrails never loads it.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from gateway.api.admin import PAGED, authorize, send_record
from gateway.controlplane.secrets import SecretError
from gateway.http.body import read_request_body
from gateway.http.errors import RecordUnusable
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send

if TYPE_CHECKING:
    from gateway.controlplane.directory import RecordCache
    from gateway.controlplane.keys import KeyStore
    from gateway.controlplane.records import Repository
    from gateway.guardrails.runner import GuardrailRunner
    from gateway.guardrails.saved import SavedGuardrail
    from gateway.guardrails.saved_cache import SavedGuardrailCache
    from gateway.schema.config import Config

BODY_LIMIT = 1024 * 1024


def _saved() -> ModuleType:
    from gateway.guardrails import saved

    return saved


def _has_items(config: Config) -> bool:
    if (config.before_request_hooks is not None or config.after_request_hooks is not None
            or config.input_guardrails is not None or config.output_guardrails is not None):
        return True
    return any(_has_items(target) for target in config.targets or ())


async def check_saved_guardrails(runner: Callable[[], GuardrailRunner], config: Config, workspace: str) -> None:
    """Every saved guardrail ``config`` names (at its root and in every target) resolved in ``workspace`` by this
    worker's runner (``runner()``), as a request resolves it (``GuardrailRunner.check_saved``): an unknown id, or
    another workspace's, is the request's 400 ``unknown guardrail``, its ``param`` the item's JSON path. A config
    with no hooks or guardrails costs a walk of its targets."""
    if not _has_items(config):
        return
    from gateway.guardrails.runner import saved_refs

    refs = saved_refs(config)
    if refs:
        await runner().check_saved(refs, workspace)


class GuardrailRoutes:
    def __init__(self, keys: KeyStore, records: RecordCache, saved: Callable[[], SavedGuardrailCache]) -> None:
        """``saved()``: this worker's saved-guardrail cache (made with the pipeline steps at first use)."""
        self.keys = keys
        self.records = records
        self.saved = saved

    @property
    def cache(self) -> SavedGuardrailCache:
        """This worker's saved-guardrail cache."""
        return self.saved()

    @property
    def repo(self) -> Repository[SavedGuardrail]:
        return self.saved().repository

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("POST", "/v1/guardrails", self.create),
            ("GET", "/v1/guardrails", self.list),
            ("GET", "/v1/guardrails/{guardrail_id}", self.get),
            ("PUT", "/v1/guardrails/{guardrail_id}", self.update),
            ("DELETE", "/v1/guardrails/{guardrail_id}", self.delete),
        ]

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "guardrails.write")
        saved = _saved()
        body = saved.parse_create(await read_request_body(scope, receive, BODY_LIMIT))
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        checks = saved.unmasked_checks(body.checks, dict)  # nothing is stored yet: a masked value is a 400
        record = saved.new_guardrail(body, workspace, caller.key.organisation, self.repo.new_id())
        record = saved.sealed(self.records.box, msgspec.structs.replace(record, checks=checks))
        record = await self.repo.create(record)
        self.cache.invalidate()
        await send_record(send, record.public(), 201)

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "guardrails.read", query=(*PAGED, "ids"))
        saved = _saved()
        query = saved.parse_list_query(caller.query)
        records = [await self._sealed(r) for r in await self.repo.list(caller.workspace)]
        await send_json(send, 200, saved.encode_page(saved.list_page(records, query)))

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "guardrails.read")
        record = await self.repo.get(caller.workspace, scope["path_params"]["guardrail_id"])
        await send_record(send, (await self._sealed(record)).public())

    async def _sealed(self, record: SavedGuardrail) -> SavedGuardrail:
        """The record as answers show it; one saved in clear by an older release is sealed now."""
        return await _saved().sealed_record(self.repo, self.records.box, record)

    async def update(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "guardrails.write")
        saved = _saved()
        given = saved.parse_update(await read_request_body(scope, receive, BODY_LIMIT))
        box = self.records.box

        async def updated(record: SavedGuardrail) -> SavedGuardrail:  # again on the record stored if another wrote
            update = given
            try:
                if update.checks is not None:  # replaces the checks: only a masked value needs the stored ones
                    checks = saved.unmasked_checks(update.checks, lambda: saved.stored_secrets(box, record),
                                                   record.checks)
                    update = msgspec.structs.replace(update, checks=checks)
                else:
                    record = saved.opened(box, record)
            except SecretError as exc:
                raise RecordUnusable(f"saved guardrail '{record.id}' cannot be changed: {exc}",
                                     param="guardrail_id") from None
            return saved.sealed(box, saved.updated_guardrail(record, update))

        record = await self.repo.update(caller.workspace, scope["path_params"]["guardrail_id"], updated)
        self.cache.invalidate()
        await send_record(send, record.public())

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "guardrails.write")
        record = await self.repo.delete(caller.workspace, scope["path_params"]["guardrail_id"])
        self.cache.invalidate()
        await send_record(send, {"id": record.id, "object": "guardrail", "deleted": True})
