"""Prompt-template routes (workspace-scoped): CRUD under ``/v1/prompts``, versions, render and completions.

- ``POST /v1/prompts`` ``{name, model, provider?, messages, hyperparameters?}`` -> 201 with the record (``id``,
  ``version`` 1, the ``variables`` a render needs); ``GET`` lists, ``GET/PUT/DELETE /v1/prompts/{prompt_id}``.
  ``PUT`` takes any of those fields and stores the result as the next version.
- ``GET /v1/prompts/{prompt_id}/versions`` and ``.../versions/{version}``: every version kept.
- ``POST /v1/prompts/{prompt_id}/render``: ``{success: true, data: {messages, model, ...hyperparameters}}``.
- ``POST /v1/prompts/{prompt_id}/completions``: the rendered request run through the chat pipeline (see
  ``gateway.pipeline.prompted``).

Admin keys manage prompts; render and completions need only the ``prompts.run`` scope, which member keys have.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api.admin import PAGED, authorize, int_query, page, read_json, send_list, send_record
from gateway.controlplane import prompts
from gateway.controlplane.providers import normalise_slug
from gateway.http.errors import InvalidRequest
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.pipeline.prompted import prompt_template
from gateway.runtime import Runtime
from gateway.schema.common import BodyDecoder

_body = BodyDecoder(prompts.PromptBody)


class PromptRoutes:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.repo = runtime.records.prompts
        self.versions = prompts.PromptVersions(runtime.store)

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [
            ("POST", "/v1/prompts", self.create),
            ("GET", "/v1/prompts", self.list),
            ("GET", "/v1/prompts/{prompt_id}", self.get),
            ("PUT", "/v1/prompts/{prompt_id}", self.update),
            ("DELETE", "/v1/prompts/{prompt_id}", self.delete),
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
            if await self.runtime.records.slugs.lookup(workspace, slug) is None:
                raise InvalidRequest(f"provider must be a provider slug of this workspace; there is no '@{slug}'",
                                     param="provider")
        return fields

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        body = await read_json(scope, receive, _body)
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        for name in ("name", "model", "messages"):
            if getattr(body, name) is msgspec.UNSET:
                raise InvalidRequest(f"{name} is required", param=name)
        prompt, _ = prompts.build(await self._fields(body, workspace), workspace)
        prompt.organisation_id = caller.key.organisation
        prompt = await self.repo.create(prompt)
        await self.versions.put(prompt)
        self.runtime.records_changed()
        await send_record(send, prompt, 201)

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope, query=(*PAGED, "search"))
        records = await self.repo.list(caller.workspace)
        search = caller.query.get("search", "").lower()
        if search:
            records = [r for r in records if search in r.name.lower()]
        size = int_query(caller.query, "page_size", 0, 0)
        current = int_query(caller.query, "current_page", 0, 0)
        await send_list(send, page(records, size, current), len(records))

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        await send_record(send, await self.repo.get(caller.workspace, scope["path_params"]["prompt_id"]))

    async def update(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        body = await read_json(scope, receive, _body)
        workspace = caller.workspace_for(body.workspace_id or caller.query.get("workspace_id"))
        current = await self.repo.get(workspace, scope["path_params"]["prompt_id"])
        changes = await self._fields(body, workspace)
        if not changes:
            raise InvalidRequest("nothing to update: send name, model, provider, messages or hyperparameters",
                                 param="messages")
        fields = {"name": current.name, "model": current.model, "provider": current.provider,
                  "messages": current.messages, "hyperparameters": current.hyperparameters, **changes,
                  "version": current.version + 1}
        prompt, _ = prompts.build(fields, workspace)
        prompt = msgspec.structs.replace(prompt, id=current.id, organisation_id=current.organisation_id,
                                         created_at=current.created_at)
        await self.versions.put(prompt)
        prompt = await self.repo.replace(prompt)
        self.runtime.records_changed()
        await send_record(send, prompt)

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        prompt = await self.repo.delete(caller.workspace, scope["path_params"]["prompt_id"])
        await self.versions.delete_all(prompt)
        self.runtime.records_changed()
        await send_record(send, {"id": prompt.id, "object": "prompt", "deleted": True})

    async def list_versions(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope, query=("workspace_id",))
        prompt = await self.repo.get(caller.workspace, scope["path_params"]["prompt_id"])
        versions = await self.versions.list(prompt)
        await send_list(send, versions, len(versions))

    async def get_version(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope)
        prompt = await self.repo.get(caller.workspace, scope["path_params"]["prompt_id"])
        raw = scope["path_params"]["version"]
        version = int(raw) if raw.isdigit() else 0
        if version < 1:
            raise InvalidRequest(f"version must be an integer >= 1, got {raw!r}", param="version")
        await send_record(send, await self.versions.get(prompt, version))

    async def render(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.runtime, scope, admin=False, needs="prompts.run")
        body = await read_json(scope, receive, prompts.render_body)
        template = await prompt_template(self.runtime.records, caller.workspace, scope["path_params"]["prompt_id"])
        await send_record(send, {"success": True, "data": prompts.rendered(template, body)})
