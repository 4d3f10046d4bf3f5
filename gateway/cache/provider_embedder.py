"""Semantic-cache embeddings from a provider, called through the gateway itself.

``GATEWAY_SEMANTIC_CACHE_EMBEDDINGS`` may hold a gateway config (the JSON a client sends in ``x-gateway-config``,
validated the same way at startup) instead of ``local``: each prompt is then embedded by an embeddings request
(``{"model": GATEWAY_SEMANTIC_CACHE_EMBEDDING_MODEL, "input": <text>}``) run through the gateway's own routing
(targets, fallbacks, retries, breakers, request timeouts, ``override_params`` / ``default_params`` /
``drop_params``), provider adapters and upstream exchange (its SSRF rules and pools), like a client's
``/v1/embeddings`` request. The answer's first vector is normalised; the model id
``<provider>:<model>`` keeps its vectors apart from any other model's.

Every wait is bounded: at most ``capacity`` embeddings in flight per worker (more answer None at once) and
``timeout_s`` per embedding; any failure answers None, and the request goes on as a cache MISS.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Protocol

import msgspec

from gateway.cache.numeric import numpy
from gateway.config.validate import ConfigParser
from gateway.http.context import RequestContext
from gateway.http.errors import ConfigError
from gateway.providers.base import EMBEDDINGS, UpstreamCall
from gateway.providers.registry import ProviderRegistry
from gateway.routing.execute import Router, RunState
from gateway.routing.params import needs_rewrite, rewrite
from gateway.routing.plan import Node, Planner
from gateway.schema.config import Config
from gateway.upstream.exchange import UpstreamExchange

log = logging.getLogger("gateway.cache")

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def embeddings_config(parser: ConfigParser, text: str) -> Config:
    """The validated config of ``GATEWAY_SEMANTIC_CACHE_EMBEDDINGS`` (ValueError naming the fault)."""
    try:
        config = parser.parse(text)
    except ConfigError as exc:
        raise ValueError(f"GATEWAY_SEMANTIC_CACHE_EMBEDDINGS: {exc.message}") from None
    return config


class Gateway(Protocol):
    """What the embedder runs through: the worker's planner, router, provider adapters and upstream exchange."""

    @property
    def planner(self) -> Planner: ...
    @property
    def router(self) -> Router: ...
    @property
    def providers(self) -> ProviderRegistry: ...
    @property
    def exchange(self) -> UpstreamExchange: ...


class ProviderEmbedder:
    """The ``Embedder`` of the semantic cache backed by a provider (see the module docstring)."""

    def __init__(self, config: Config, model: str, runtime: Gateway, *, capacity: int = 17,
                 timeout_s: float = 1.0) -> None:
        from gateway.schema.embeddings import parse_embeddings

        self.config = config
        self.model = model
        #: the worker's runtime: its router, provider adapters and upstream exchange
        self.runtime = runtime
        self.capacity = capacity
        self.timeout_s = timeout_s
        self.node = runtime.planner.build(config)
        provider = config.provider or (config.targets[0].provider if config.targets else None) or "provider"
        self.model_id = f"{provider}:{model}"
        self.dimensions = 0  # known after the first answer
        self._parse = parse_embeddings
        self._pending = 0

    async def embed(self, text: str) -> Any:
        if self._pending >= self.capacity:
            return None
        self._pending += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await self._call(text)
            return self._vector(body)
        except Exception as exc:  # noqa: BLE001 - a failed embedding is a MISS, never the request's error
            log.warning("semantic cache: the embeddings provider failed: %s", getattr(exc, "message", exc))
            return None
        finally:
            self._pending -= 1

    async def _call(self, text: str) -> bytes:
        body = _encode({"model": self.model, "input": text})
        request = self._parse(body)
        ctx = RequestContext()
        runtime = self.runtime

        async def attempt(node: Node) -> bytes:
            config = node.config
            provider = config.provider or ""
            adapter = runtime.providers.get(provider)
            adapter.check_endpoint(EMBEDDINGS)
            call_body, call_request = body, request
            if needs_rewrite(config):
                call_body = _encode(rewrite(_decode(body), config))
                call_request = self._parse(call_body)
            call = UpstreamCall(EMBEDDINGS, config, call_body, call_request, False, ctx, provider)
            upstream = await adapter.build_request(call)
            exchange = runtime.exchange
            response = await exchange.send(ctx, config, upstream)
            if not 200 <= response.status < 300:
                raise await exchange.refused(response, adapter, call, upstream, config)
            try:
                data = await response.read_body()
            finally:
                response.release()
            return adapter.parse_response(call, response.status, response.headers, data).body

        return await runtime.router.run(self.node, attempt, RunState(None, {}, dict))

    def _vector(self, body: bytes) -> Any:
        np = numpy()
        doc = _decode(body)
        values = doc["data"][0]["embedding"]
        vector = np.asarray(values, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        if vector.ndim != 1 or not vector.size or not math.isfinite(norm) or norm == 0.0:
            return None
        if not self.dimensions:
            self.dimensions = int(vector.size)
        elif vector.size != self.dimensions:
            return None
        return vector / norm

    async def close(self) -> None:
        return None
