"""Prompt-template routes (workspace-scoped): CRUD under ``/v1/prompts``, versions, render and completions.

- ``POST /v1/prompts`` ``{name, model, provider?, messages, hyperparameters?}`` -> 201 with the record (``id``,
  ``version`` 1, the ``variables`` a render needs); ``GET`` lists, ``GET/PUT/DELETE /v1/prompts/{prompt_id}``.
  ``PUT`` takes any of those fields and stores the result as the next version (numbered by the version record
  it won: ``prompts.PromptVersions.next``), then makes it the prompt unless a later version already is.
- ``GET /v1/prompts/{prompt_id}/versions`` and ``.../versions/{version}``: every version kept.
- ``POST /v1/prompts/{prompt_id}/render``: ``{success: true, data: {messages, model, ...hyperparameters}}``.
- ``POST /v1/prompts/{prompt_id}/completions``: the rendered request run through the chat pipeline (see
  ``gateway.pipeline.prompted``).

Admin keys manage prompts; render and completions need only the ``prompts.run`` scope, which member keys have.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.api.admin import PAGED, Caller, authorize, read_json, send_list, send_record
from gateway.api.crud import RecordRoutes
from gateway.controlplane import prompts
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.providers import normalise_slug
from gateway.http.errors import InvalidRequest
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.pipeline.prompted import prompt_template
from gateway.schema.common import BodyDecoder

_body = BodyDecoder(prompts.PromptBody)


class PromptRoutes(RecordRoutes[prompts.Prompt, prompts.PromptBody]):
    path = "/v1/prompts"
    id_param = "prompt_id"
    object = "prompt"
    list_query = (*PAGED, "search")

    def __init__(self, keys: KeyStore, records: RecordCache) -> None:
        super().__init__(keys, records.prompts, _body)
        self.records = records
        self.versions = prompts.PromptVersions(records.prompts)

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [
            *super().routes(),
            ("GET", "/v1/prompts/{prompt_id}/versions", self.list_versions),
            ("GET", "/v1/prompts/{prompt_id}/versions/{version}", self.get_version),
            ("POST", "/v1/prompts/{prompt_id}/render", self.render),
        ]

    async def _fields(self, body: prompts.PromptBody, workspace: str) -> dict[str, Any]:
        fields = {k: getattr(body, k) for k in ("name", "model", "provider", "messages", "hyperparameters")
                  if getattr(body, k) is not msgspec.UNSET}
        if "hyperparameters" in fields:
            fields["hyperparameters"] = prompts.hyperparameters_of(fields["hyperparameters"])
        slug = fields.get("provider")
        if slug is not None:
            slug = fields["provider"] = normalise_slug(slug, "provider")
            if await self.records.slugs.lookup(workspace, slug) is None:
                raise InvalidRequest(f"provider must be a provider slug of this workspace; there is no '@{slug}'",
                                     param="provider")
        return fields

    async def build(self, caller: Caller, workspace: str, body: prompts.PromptBody) -> prompts.Prompt:
        for name in ("name", "model", "messages"):
            if getattr(body, name) is msgspec.UNSET:
                raise InvalidRequest(f"{name} is required", param=name)
        prompt, _ = prompts.build(await self._fields(body, workspace), workspace)
        prompt.organisation_id = caller.key.organisation
        return prompt

    async def created(self, record: prompts.Prompt) -> None:
        await self.versions.first(record)

    def matches(self, query: dict[str, str]) -> Callable[[prompts.Prompt], bool] | None:
        search = query.get("search", "").lower()
        return (lambda r: search in r.name.lower()) if search else None

    async def update(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The next version: stored among the versions (a number of its own), then made the prompt."""
        _, workspace, body = await self._caller_and_body(scope, receive)
        current = await self.repo.get(workspace, self.record_id(scope))
        changes = await self._fields(body, workspace)
        if not changes:
            raise InvalidRequest("nothing to update: send name, model, provider, messages or hyperparameters",
                                 param="messages")

        def applied_to(base: prompts.Prompt) -> prompts.Prompt:
            fields = {"name": base.name, "model": base.model, "provider": base.provider, "messages": base.messages,
                      "hyperparameters": base.hyperparameters, **changes}
            prompt, _ = prompts.build(fields, workspace)
            return msgspec.structs.replace(prompt, id=base.id, organisation_id=base.organisation_id,
                                           created_at=base.created_at)

        version = await self.versions.next(current, applied_to)
        await self.versions.make_current(version)
        await send_record(send, await self.shown(version))

    async def deleted(self, record: prompts.Prompt) -> None:
        await self.versions.delete_all(record)

    async def list_versions(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.read_scope, query=("workspace_id",))
        prompt = await self.repo.get(caller.workspace, scope["path_params"]["prompt_id"])
        versions = await self.versions.list(prompt)
        await send_list(send, versions, len(versions))

    async def get_version(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.read_scope)
        prompt = await self.repo.get(caller.workspace, scope["path_params"]["prompt_id"])
        raw = scope["path_params"]["version"]
        version = int(raw) if raw.isdigit() else 0
        if version < 1:
            raise InvalidRequest(f"version must be an integer >= 1, got {raw!r}", param="version")
        await send_record(send, await self.versions.get(prompt, version))

    async def render(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "prompts.run", admin=False)
        body = await read_json(scope, receive, prompts.render_body)
        template = await prompt_template(self.records, caller.workspace, scope["path_params"]["prompt_id"])
        await send_record(send, {"success": True, "data": prompts.rendered(template, body)})
