"""Policy routes: ``/v1/policies/usage-limits`` and ``/v1/policies/rate-limits`` (admin gateway keys only).

For each kind (``object`` is ``policy_usage_limits`` in every answer about either kind, as the spec says):
``POST`` creates (200, ``{id, object}``), ``GET`` lists (``{object: "list", data, total}``; query ``workspace_id``
(or ``workspace``), ``status`` (``active`` / ``archived``; absent: both), ``type``, for rate limits ``unit``, and
``page_size`` / ``current_page`` (pages counted from 0; ``page_size`` 0 or absent: everything); ``total`` counts
every match, not just the page; any other query name is a 400 naming it), and on ``/{policy_id}``: ``GET`` reads
one, ``PUT`` updates (conditions included; ``type`` and ``group_by`` are fixed) and ``DELETE`` archives, answering
``{id, object, deleted: true}`` as every control-plane delete does (the policy no longer applies but stays
readable with ``status: "archived"``; ``PUT`` with ``status: "active"`` restores it). Every write answers once
the change applies on this worker and, with several workers or Redis, after two record-watch intervals, by when
the other workers and instances have loaded it: requests sent after the answer meet the change wherever they
land. Every answer that shows a policy carries its current usage (see ``gateway/policies/usage.py``).
Rules: ``gateway/controlplane/policies.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import msgspec

from gateway.api.admin import PAGED, Caller, authorize, choice_query, int_query, page, read_json, send_list, send_record
from gateway.controlplane import policies as rules
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.records import Repository, store_unavailable
from gateway.http.errors import NotFound
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.policies.gate import PolicyGate
from gateway.policies.usage import archived, created, policy_view
from gateway.schema.common import BodyDecoder
from gateway.settings import Settings
from gateway.state.base import StateStore, StateStoreError


class _KindRoutes:
    """The five routes of one policy kind."""

    def __init__(self, owner: PolicyRoutes, path: str, repo: Repository, decoder: BodyDecoder, new: Callable,
                 update: Callable, filters: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        self.keys, self.store, self.gate = owner.keys, owner.store, owner.gate
        self.path = path
        self.repo = repo
        self.decoder = decoder
        self.new = new
        self.update_record = update
        self.filters = filters
        self.query = (*PAGED, *(name for name, _ in filters))
        settings = owner.settings
        #: two record-watch intervals: every other worker polls the records version within one and loads the
        #: policies in the next, so requests sent after the answer meet the change wherever they land
        shared = settings.workers > 1 or bool(settings.redis_url)
        self.spread_s = 2 * settings.state_watch_interval_ms / 1000 if shared else 0.0

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        one = self.path + "/{policy_id}"
        return [("POST", self.path, self.create), ("GET", self.path, self.list), ("GET", one, self.get),
                ("PUT", one, self.update), ("DELETE", one, self.archive)]

    def _workspace(self, caller: Caller, body: Any) -> str:
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        if body.organisation_id and body.organisation_id != caller.key.organisation:
            raise NotFound(f"no organisation '{body.organisation_id}'", param="organisation_id")
        return workspace

    async def _view(self, record: rules.Policy) -> dict[str, Any]:
        try:
            return await policy_view(self.store, record)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def _stored(self, workspace: str, id: str,
                      change: Callable[[rules.Policy], rules.Policy | None]) -> rules.Policy:
        """The policy ``id`` changed and stored (read again and changed again when another write came first);
        applied when ``change`` changed it."""
        changed = False

        async def apply(current: rules.Policy) -> rules.Policy | None:
            nonlocal changed
            record = change(current)
            changed = record is not None
            return record

        record = await self.repo.update(workspace, id, apply)
        if changed:
            await self._applied()
        return record

    async def _applied(self) -> None:
        """A policy changed: this worker applies it before answering, and with other workers or instances the
        answer waits until their record watchers have had time to load it (see ``spread_s``)."""
        self.gate.invalidate()
        await self.gate.refresh()
        if self.spread_s:
            await asyncio.sleep(self.spread_s)

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "policies.write")
        body = await read_json(scope, receive, self.decoder)
        record = self.new(body, self._workspace(caller, body), caller.key.organisation)
        record = await self.repo.create(record)
        await self._applied()
        await send_record(send, created(record))

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "policies.read", query=self.query)
        records = await self.repo.list(caller.workspace)
        for field, choices in self.filters:
            wanted = choice_query(caller.query, field, choices)
            if wanted is not None:
                records = [r for r in records if getattr(r, field) == wanted]
        size = int_query(caller.query, "page_size", 0, 0)
        current = int_query(caller.query, "current_page", 0, 0)
        data = await asyncio.gather(*(self._view(r) for r in page(records, size, current)))
        await send_list(send, data, len(records))

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "policies.read")
        record = await self.repo.get(caller.workspace, scope["path_params"]["policy_id"])
        await send_record(send, await self._view(record))

    async def update(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "policies.write")
        body = await read_json(scope, receive, self.decoder)
        record = await self._stored(self._workspace(caller, body), scope["path_params"]["policy_id"],
                                    lambda current: self.update_record(current, body))
        await send_record(send, await self._view(record))

    async def archive(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "policies.write")
        record = await self._stored(caller.workspace, scope["path_params"]["policy_id"], _archived)
        await send_record(send, archived(record))


class PolicyRoutes:
    def __init__(self, keys: KeyStore, store: StateStore, gate: PolicyGate, settings: Settings) -> None:
        self.keys, self.store, self.gate, self.settings = keys, store, gate, settings
        self.kinds = (
            _KindRoutes(self, "/v1/policies/usage-limits", gate.usage_limits, BodyDecoder(rules.UsageLimitBody),
                        rules.new_usage_limit, rules.updated_usage_limit,
                        (("status", rules.STATUSES), ("type", rules.USAGE_TYPES))),
            _KindRoutes(self, "/v1/policies/rate-limits", gate.rate_limits, BodyDecoder(rules.RateLimitBody),
                        rules.new_rate_limit, rules.updated_rate_limit,
                        (("status", rules.STATUSES), ("type", rules.RATE_TYPES), ("unit", rules.RATE_UNITS))),
        )

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [route for kind in self.kinds for route in kind.routes()]


def _archived(policy: rules.Policy) -> rules.Policy | None:
    """``policy`` archived (None when it already is)."""
    return None if policy.status == "archived" else msgspec.structs.replace(policy, status="archived")
