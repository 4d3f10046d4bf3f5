"""The models a workspace can reach: each provider slug's (and the request's own provider's) models list, merged.

Providers that answer a models list: the vendorA-compatible ones (``GET {base}/models`` with the bearer key; the
answer is ``{"data": [{"id", "object": "model", "created", "owned_by"}]}``) and anthropic (``GET {base}/models`` with
``x-api-key`` and ``anthropic-version: 2023-06-01``, ``limit`` up to 1000; items ``{"id", "display_name",
"created_at" (ISO 8601), "type": "model"}``). Other providers list nothing.

Lists are fetched concurrently (at most ``CONCURRENCY`` at a time, each bounded by ``TIMEOUT_S``), through the
upstream client (so custom hosts get the SSRF checks), and cached per provider, base URL and key for ``TTL_S``. A
source that fails is reported in the answer's ``errors`` and left out; the others still answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import datetime
from typing import Any

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.http.errors import GatewayError
from gateway.providers.base import upstream_error
from gateway.providers.registry import VENDOR_A_COMPATIBLE
from gateway.schema import header_values
from gateway.schema.config import Config
from gateway.schema.header_values import field_with_breaks
from gateway.upstream.error_text import scrubbed, sent_secrets
from gateway.upstream.exchange import UpstreamExchange
from gateway.upstream.request import UpstreamRequest

TTL_S = 60.0
TIMEOUT_S = 10.0
CONCURRENCY = 8
ANTHROPIC_BASE = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
_CACHE_MAX = 1024


class _Item(msgspec.Struct):
    id: str
    created: int | None = None
    created_at: str | None = None
    owned_by: str | None = None
    display_name: str | None = None


class _Listing(msgspec.Struct):
    data: list[_Item] = []


_listing = msgspec.json.Decoder(_Listing)


class Source:
    """One place models come from: a slug (``label`` ``@slug``) or the request's own provider."""

    __slots__ = ("label", "slug", "config")

    def __init__(self, label: str, slug: str | None, config: Config) -> None:
        self.label = label
        self.slug = slug
        self.config = config


def lists_models(provider: str | None) -> bool:
    return provider is not None and (provider in VENDOR_A_COMPATIBLE or provider == "anthropic")


def _request(config: Config) -> UpstreamRequest:
    provider = config.provider or ""
    if provider == "anthropic":
        base = (config.custom_host or ANTHROPIC_BASE).rstrip("/")
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if config.api_key:
            headers["x-api-key"] = config.api_key
        return UpstreamRequest(f"{base}/models?limit=1000", headers, b"", "GET")
    base = (config.custom_host or VENDOR_A_COMPATIBLE[provider][0]).rstrip("/")
    headers = {}
    if config.api_key:
        headers["authorization"] = f"Bearer {config.api_key}"
    if config.vendorA_organization:
        headers["openai-organization"] = config.vendorA_organization
    if config.vendorA_project:
        headers["openai-project"] = config.vendorA_project
    return UpstreamRequest(f"{base}/models", headers, b"", "GET")


def _created(item: _Item) -> int:
    if item.created is not None:
        return item.created
    if item.created_at:
        try:
            return int(datetime.fromisoformat(item.created_at.replace("Z", "+00:00")).timestamp())
        except ValueError:
            return 0
    return 0


class ModelCatalog:
    """Fetches and caches providers' model lists for ``GET /v1/models``."""

    def __init__(self, exchange: UpstreamExchange) -> None:
        """``exchange``: the worker's upstream exchange, whose transport (swappable in tests) sends the lists."""
        self.exchange = exchange
        self._cache: BoundedCache[tuple[str, str, str], tuple[float, list[_Item]]] = BoundedCache(_CACHE_MAX)
        self._limit = asyncio.Semaphore(CONCURRENCY)

    async def _fetch(self, config: Config) -> list[_Item]:
        request = _request(config)
        key = (config.provider or "", request.url, hashlib.sha256((config.api_key or "").encode()).hexdigest())
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        async with self._limit:
            async with asyncio.timeout(TIMEOUT_S):
                response = await self.exchange.transport.open(request)
                try:
                    body = await response.read_body()
                finally:
                    response.release()
        if not 200 <= response.status < 300:
            raise scrubbed(upstream_error(config.provider or "", response.status, body), sent_secrets(request, config))
        try:
            items = _listing.decode(body).data
        except msgspec.DecodeError:
            raise GatewayError(f"{config.provider} answered its models list in an unknown format") from None
        self._cache[key] = (now + TTL_S, items)
        return items

    async def _one(self, source: Source) -> list[dict[str, Any]] | dict[str, Any]:
        broken = field_with_breaks(source.config)
        if broken is not None:  # a slug stored before such values were refused: it cannot be sent
            return {"source": source.label, "message": f"{broken} {header_values.MESSAGE}: update it"}
        try:
            items = await self._fetch(source.config)
        except TimeoutError:
            return {"source": source.label, "message": f"timed out after {TIMEOUT_S:g} s"}
        except GatewayError as error:
            return {"source": source.label, "message": error.message}
        provider = source.config.provider
        return [
            {"id": item.id, "object": "model", "created": _created(item),
             "owned_by": item.owned_by or provider, "provider": provider, "slug": source.slug,
             **({"display_name": item.display_name} if item.display_name else {})}
            for item in items
        ]

    async def models(self, sources: list[Source]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every model of every source that lists them (sorted by slug, then id) and the sources that failed."""
        answers = await asyncio.gather(*(self._one(s) for s in sources if lists_models(s.config.provider)))
        models: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for answer in answers:
            if isinstance(answer, dict):
                errors.append(answer)
            else:
                models.extend(answer)
        models.sort(key=lambda m: (m["slug"] or "", m["provider"] or "", m["id"]))
        return models, errors
