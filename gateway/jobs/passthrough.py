"""Forwarding files, batches, fine-tuning and stored-responses calls to the provider a request identifies.

The request's provider comes from the same four ways as inference (``ConfigResolver.resolve``, with the slugs and
saved configs of the caller's workspace); a config must come down to one target (a lone target, or ``single``
strategies leading to one), since the ids of these resources belong to one provider account: fallbacks and load
balancing make no sense for them. The adapter builds the URL and auth
(``resource_request``); a provider without the resource answers 400 naming it before anything is sent. The
upstream's 2xx answer is relayed as it came (a JSON object, else a 502 naming the provider); a non-2xx answer is
the provider's error in the unified format with its status (an unknown id stays a 404).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import msgspec

from gateway.http.context import RequestContext
from gateway.http.errors import InvalidRequest, NotFound
from gateway.http.respond import end_stream, gateway_headers, send_chunk, send_json
from gateway.http.types import Send
from gateway.providers.base import ProviderAdapter, UpstreamCall, malformed
from gateway.providers.registry import ProviderRegistry
from gateway.routing.plan import Node
from gateway.schema.config import Config
from gateway.upstream.exchange import UpstreamExchange
from gateway.upstream.transport import UpstreamResponse

_decode = msgspec.json.decode
log = logging.getLogger("gateway.jobs")


_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:~-]{1,256}$")


def path_id(value: str, param: str, what: str) -> str:
    """An id taken from the request path, safe to put in a provider URL; anything else is no such object (404)."""
    if not _SAFE_ID.match(value):
        raise NotFound(f"no {what} with id {value!r}", param=param)
    return value


def names_provider(ctx: RequestContext) -> bool:
    """Whether the request identifies a provider (provider name or slug, virtual key or config)."""
    return bool(ctx.provider or ctx.virtual_key or ctx.config)


def _single_target(node: Node) -> Node:
    while node.mode is not None:
        if node.mode != "single" and len(node.children) != 1:
            raise InvalidRequest(
                "files, batches, fine-tuning jobs and stored responses belong to one provider account: use a config "
                f"with a single target (this one's strategy is {node.mode})", param="x-gateway-config")
        node = node.children[0]
    return node


class Forwarder:
    """Sends one resource call to the identified provider and relays its answer."""

    def __init__(self, resolve: Callable[[RequestContext], Awaitable[Config]], plan: Callable[[Config], Node],
                 exchange: UpstreamExchange, providers: ProviderRegistry) -> None:
        #: the request's effective config (the four ways inference resolves it, loading the records it needs)
        self.resolve = resolve
        self.plan = plan
        #: the worker's upstream exchange (the forwarded headers, the provider's errors, masking)
        self.exchange = exchange
        self.providers = providers

    async def target(self, ctx: RequestContext, resource: str) -> tuple[ProviderAdapter, Any]:
        """The adapter and effective config for ``resource`` (400 when none is identified or it lacks it). Provider
        slugs and saved configs are those of the caller's workspace (``ctx.workspace``, set from its key)."""
        config = await self.resolve(ctx)
        node = _single_target(self.plan(config))
        config = node.config
        if not config.provider:
            raise InvalidRequest(f"{node.path} has no provider", param=f"{node.path}.provider")
        adapter = self.providers.get(config.provider)
        adapter.check_endpoint(resource)
        return adapter, config

    async def open(self, ctx: RequestContext, resource: str, method: str, path: str, query: str = "",
                   body: Any = b"", content_type: str | None = None,
                   target: tuple[ProviderAdapter, Any] | None = None) -> tuple[ProviderAdapter, UpstreamResponse]:
        """Send the call; the response's status is 2xx (otherwise the provider's error is raised)."""
        adapter, config = target or await self.target(ctx, resource)
        if not isinstance(body, (bytes, bytearray)):
            # one payload for every send: a resend after a stale pooled connection starts from the file's start
            body = aiohttp.payload.get_payload(body)
        request = adapter.resource_request(config, method, path, query, body, content_type)
        exchange = self.exchange
        response = await exchange.send(ctx, config, request, stream=True)
        if not 200 <= response.status < 300:
            call = UpstreamCall(resource, config, b"", None, False, ctx, adapter.name)
            error = await exchange.refused(response, adapter, call, request, config)
            error.headers = (error.headers or []) + gateway_headers(ctx.trace_id, adapter.name)
            raise error
        return adapter, response

    async def relay_json(self, send: Send, ctx: RequestContext, resource: str, method: str, path: str,
                         query: str = "", body: Any = b"", content_type: str | None = None,
                         target: tuple[ProviderAdapter, Any] | None = None) -> None:
        """Forward and answer the provider's JSON object with the gateway's response headers."""
        adapter, response = await self.open(ctx, resource, method, path, query, body, content_type, target)
        try:
            data = await response.read_body()
        finally:
            response.release()
        try:
            doc = _decode(data)
        except msgspec.DecodeError:
            doc = None
        if not isinstance(doc, dict):
            raise malformed(adapter.name, "not a JSON object", data)
        await send_json(send, response.status, data, gateway_headers(ctx.trace_id, adapter.name))

    async def relay_bytes(self, send: Send, ctx: RequestContext, resource: str, path: str) -> None:
        """Forward a GET and stream the provider's body back as it arrives (file contents)."""
        adapter, response = await self.open(ctx, resource, "GET", path)
        headers = [(b"content-type", (response.headers.get("content-type") or "application/octet-stream").encode(
            "latin-1"))]
        headers.extend(gateway_headers(ctx.trace_id, adapter.name))
        try:
            await send({"type": "http.response.start", "status": response.status, "headers": headers})
            try:
                async for piece in response.chunks(256 * 1024):
                    await send_chunk(send, piece)
            except response.read_errors as exc:
                # the status is out: end the body early (the client sees a short read), and say why in the log
                log.warning("%s broke off a file download: %s", adapter.name, exc.__class__.__name__)
            await end_stream(send)
        finally:
            response.release()

