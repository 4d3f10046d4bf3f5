"""The inference path's use of control-plane records: loading what a request names, and running prompt templates.

``loaded`` retries a record-reading step after loading what it missed (a bounded number of rounds: a saved config
may name slugs, which are found only once the config is read). ``prompt_inputs`` turns a request that runs a
prompt template (``POST /v1/prompts/{id}/completions``, or a config whose root has ``prompt_id``) into the chat
body and config the normal pipeline runs: the body holds ``variables``, hyperparameters and the client's own
``model`` and ``messages`` as for a render (``prompts.rendered``: the template's messages first, then the
client's; the template's model); the provider is the request's own (headers or config) when it names one, else the
template's slug.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import msgspec

from gateway.config.resolve import ConfigResolver
from gateway.controlplane import prompts
from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.http.context import RequestContext
from gateway.http.errors import InvalidRequest, NotFound, ServiceUnavailable
from gateway.providers.base import CHAT
from gateway.schema.config import Config

T = TypeVar("T")
_ROUNDS = 4
_encode = msgspec.json.encode


async def loaded(records: RecordCache, needed: RecordsNeeded, step: Callable[..., T], *args: Any) -> T:
    """``step(*args)`` after loading what ``needed`` names (and whatever the next tries miss)."""
    for _ in range(_ROUNDS):
        await records.fetch(needed)
        try:
            return step(*args)
        except RecordsNeeded as more:
            needed = more
    # every load raced a change of the records (they are being written faster than a worker can read them)
    raise ServiceUnavailable("control-plane records are changing too fast to be read; try again shortly")


async def resolve(resolver: ConfigResolver, records: RecordCache, ctx: RequestContext) -> Config:
    """``resolver.resolve`` that loads the records it needs (the pipeline calls it only after a miss)."""
    try:
        return resolver.resolve(ctx, records)
    except RecordsNeeded as needed:
        return await loaded(records, needed, resolver.resolve, ctx, records)


async def prompt_template(records: RecordCache, workspace: str, prompt_id: str, param: str = "prompt_id",
                          missing: type[InvalidRequest] | type[NotFound] = NotFound) -> prompts.Template:
    """The compiled template of the workspace's prompt ``prompt_id``; ``missing`` (404) when there is none."""
    try:
        template = records.prompt(workspace, prompt_id)
    except RecordsNeeded as needed:
        template = await loaded(records, needed, records.prompt, workspace, prompt_id)
    if template is None:
        raise missing(f"no prompt with id '{prompt_id}'", param=param)
    return template


def _names_provider(config: Config) -> bool:
    return config.provider is not None or config.virtual_key is not None or bool(config.targets)


async def _template_provider(resolver: ConfigResolver, records: RecordCache, ctx: RequestContext,
                             template: prompts.Template, config: Config | None) -> Config:
    """The request's config (or none) on the template's slug. As with ``x-gateway-provider: @slug``, the
    Authorization bearer (which every client library sends) fills the slug's ``api_key`` only when the slug has
    none; an ``api_key`` the JSON config sets itself is the caller's own key and is kept."""
    workspace = ctx.workspace or ""
    slug = template.prompt.provider
    if slug is None:
        raise InvalidRequest(
            f"prompt '{template.prompt.id}' has no provider slug: identify a provider with the request "
            "(x-gateway-provider, x-gateway-config or x-gateway-virtual-key)",
            param="x-gateway-provider",
        )
    # one base object per (config, slug) until the records change, so the expansion below is cached too
    from_header = config is not None and ctx.bearer is not None and config.api_key == ctx.bearer
    key = ("prompt-provider", workspace, slug, id(config), from_header)
    hit = records.derived.get(key)
    if hit is not None and hit[0] is config:
        base = hit[1]
    else:
        if config is None:
            base = Config(provider=f"@{slug}")
        elif from_header:  # the bearer's, not a key the config sets itself
            base = msgspec.structs.replace(config, provider=f"@{slug}", api_key=None)
        else:
            base = msgspec.structs.replace(config, provider=f"@{slug}")
        records.keep(key, (config, base))
    try:
        expanded = resolver.refs.expand(base, workspace, records)
    except RecordsNeeded as needed:
        expanded = await loaded(records, needed, resolver.refs.expand, base, workspace, records)
    if from_header and expanded.api_key is None:  # a slug without a key: the bearer's, as for a header slug
        hit = records.derived.get((key, "bearer"))
        if hit is not None and hit[0] is expanded:
            return hit[1]
        filled = msgspec.structs.replace(expanded, api_key=ctx.bearer)
        records.keep((key, "bearer"), (expanded, filled))
        return filled
    return expanded


def _render(template: prompts.Template, body: bytes) -> bytes:
    return _encode(prompts.rendered(template, prompts.render_body.decode(body)))


async def prompt_inputs(resolver: ConfigResolver, records: RecordCache, ctx: RequestContext, body: bytes,
                        prompt_id: str, config: Config | None) -> tuple[bytes, Config]:
    """The chat body and config of a request running the prompt ``prompt_id``. ``config`` is the request's own
    (None on the prompt route when the request names no provider)."""
    workspace = ctx.workspace or ""
    if config is None:
        template = await prompt_template(records, workspace, prompt_id, "prompt_id", NotFound)
        return _render(template, body), await _template_provider(resolver, records, ctx, template, None)
    template = await prompt_template(records, workspace, prompt_id, "prompt_id", InvalidRequest)
    rendered = _render(template, body)
    if not _names_provider(config):
        config = await _template_provider(resolver, records, ctx, template, config)
    return rendered, config


async def config_prompt(resolver: ConfigResolver, records: RecordCache, ctx: RequestContext, body: bytes,
                        config: Config, endpoint: str) -> tuple[bytes, Config]:
    """A config with ``prompt_id`` at its root: the request body is a render body, run as a chat request."""
    if endpoint != CHAT:
        raise InvalidRequest("a config's prompt_id runs on /v1/chat/completions only", param="prompt_id")
    return await prompt_inputs(resolver, records, ctx, body, config.prompt_id or "", config)


async def route_inputs(resolver: ConfigResolver, records: RecordCache, ctx: RequestContext, body: bytes,
                       prompt_id: str) -> tuple[bytes, Config]:
    """``POST /v1/prompts/{id}/completions``: the request's provider when it names one, else the template's."""
    config = None
    if ctx.config or ctx.provider or ctx.virtual_key:
        config = await resolve(resolver, records, ctx)
    return await prompt_inputs(resolver, records, ctx, body, prompt_id, config)
