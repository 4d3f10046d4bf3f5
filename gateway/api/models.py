"""``GET /v1/models``: the models reachable through the workspace's provider slugs and the request's own provider.

Sources: every provider slug of the caller's workspace, plus the provider the request identifies the way an
inference request does (``x-gateway-provider`` and bearer, ``x-gateway-config``...), when it does. Query:
``provider`` (a provider name, or a slug of the workspace with or without ``@``; anything else is a 400 naming it),
``search`` (a case-insensitive part of the model id), ``page_size`` (default: all) and ``current_page`` (from 0);
any other query name is a 400 naming it (``gateway.api.admin.known_query``). Answers ``{"object": "list", "data": [...],
"total": n, "total_count": n, "errors": [...]}`` where both totals count the models after filtering (before
paging), and ``errors`` names each source whose list could not be read. Needs the ``models.read`` scope.
"""

from __future__ import annotations

from typing import Any

from gateway.api.admin import PAGED, authorize, int_query, page, provider_query, send_list
from gateway.config.inherit import Inheritance
from gateway.config.resolve import ConfigResolver
from gateway.controlplane import providers
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.models import ModelCatalog, Source
from gateway.controlplane.secrets import SecretError
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.pipeline import prompted
from gateway.schema.config import Config
from gateway.upstream.exchange import UpstreamExchange


def _leaves(inheritance: Inheritance, config: Config, parent: Config | None = None) -> list[Config]:
    node = inheritance.effective(parent, config) if parent is not None else config
    if not config.targets:
        return [node] if node.provider else []
    return [leaf for target in config.targets for leaf in _leaves(inheritance, target, node)]


class ModelRoutes:
    def __init__(self, keys: KeyStore, records: RecordCache, resolver: ConfigResolver, inheritance: Inheritance,
                 exchange: UpstreamExchange) -> None:
        self.keys = keys
        self.records = records
        self.resolver = resolver
        self.inheritance = inheritance
        self.catalog = ModelCatalog(exchange)

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [("GET", "/v1/models", self.list)]

    async def _sources(self, caller: Any) -> tuple[list[Source], list[dict[str, Any]]]:
        records = self.records
        sources: list[Source] = []
        errors: list[dict[str, Any]] = []
        slugs = await records.slugs.list(caller.workspace)
        provider_query(caller.query, [record.slug for record in slugs])  # a name nothing can match is a 400
        for record in slugs:
            try:
                sources.append(Source(f"@{record.slug}", record.slug, providers.slug_config(records.box, record)))
            except SecretError as exc:
                errors.append({"source": f"@{record.slug}", "message": str(exc)})
        ctx = caller.ctx
        if ctx.provider or ctx.config or ctx.virtual_key:
            ctx.workspace = caller.workspace
            config = await prompted.resolve(self.resolver, records, ctx)
            for leaf in _leaves(self.inheritance, config):
                sources.append(Source(leaf.provider or "", None, leaf))
        return sources, errors

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, "models.read", admin=False,
                                 query=(*PAGED, "provider", "search"))
        query = caller.query
        size = int_query(query, "page_size", 0, 0)
        current = int_query(query, "current_page", 0, 0)
        sources, errors = await self._sources(caller)
        models, failed = await self.catalog.models(sources)
        wanted = query.get("provider")
        if wanted:
            slug = wanted[1:] if wanted.startswith("@") else wanted
            models = [m for m in models if m["provider"] == wanted or m["slug"] == slug]
        search = query.get("search", "").lower()
        if search:
            models = [m for m in models if search in m["id"].lower()]
        total = len(models)
        await send_list(send, page(models, size, current), total, total_count=total, errors=errors + failed)
