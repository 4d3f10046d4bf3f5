"""The one upstream exchange of the request path: the forwarded headers merged, the request sent through the
worker's transport, a non-2xx answer turned into the provider's error, and credentials masked in any error.

Chat and the front doors (``pipeline/pipeline.py``), images and audio (``pipeline/media.py``), the semantic cache's
embeddings (``cache/provider_embedder.py``) and the files, batches and fine-tuning passthrough
(``jobs/passthrough.py``) all call upstreams this way (the ``GET /v1/models`` listing sends its plain GET straight
through ``exchange.transport``, so a swapped transport answers it too)::

    response = await exchange.send(ctx, target, request, stream)
    if not 200 <= response.status < 300:
        raise await exchange.refused(response, adapter, call, request, target)
    data = await response.read_body()       # or response.read_some() / response.chunks() for a stream
    response.release()

``send`` is not a coroutine of its own: it merges the headers and hands back the transport's ``open``, so the hot
path pays no frame or await for it. How a 2xx answer is read (whole, its first events, relayed raw) is the caller's:
the reads are on the response (``transport.UpstreamResponse``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError
from gateway.upstream.error_text import scrubbed, sent_secrets
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse, UpstreamTransport


class ErrorParser(Protocol):
    """What turns a provider's error answer into the gateway's error (a provider adapter)."""

    def parse_error(self, call: Any, status: int, headers: Any, body: bytes) -> GatewayError: ...


class UpstreamExchange:
    """The worker's upstream exchange over its ``transport`` (see the module docstring); ``masked_headers`` are
    the header names never forwarded, whatever a request or config says."""

    __slots__ = ("transport", "masked_headers")

    def __init__(self, transport: UpstreamTransport, masked_headers: frozenset[str]) -> None:
        self.transport = transport
        self.masked_headers = masked_headers

    def send(self, ctx: RequestContext, target: Any, request: UpstreamRequest, stream: bool = False
             ) -> Awaitable[UpstreamResponse]:
        """Send ``request`` with the client headers ``target`` (a config) forwards (the request's own win); await
        the result for the answer, its head read."""
        forwarded = ctx.forwarded(target.forward_headers, self.masked_headers)
        if forwarded:
            forwarded.update(request.headers)
            request.headers = forwarded
        return self.transport.open(request, stream)

    @staticmethod
    async def refused(response: UpstreamResponse, adapter: ErrorParser, call: Any, request: UpstreamRequest,
                      target: Any) -> GatewayError:
        """The provider's error for a non-2xx answer: its body read (bounded) and the answer released, the
        credentials the request carried masked (an upstream may echo them)."""
        try:
            data = await response.read_body()
        except GatewayError as error:
            response.close()
            raise masked(error, request, target) from None
        response.release()
        return masked(adapter.parse_error(call, response.status, response.headers, data), request, target)


def masked(error: GatewayError, request: UpstreamRequest | None, target: Any) -> GatewayError:
    """``error`` with the credentials ``request`` carried to ``target`` masked (it may quote the upstream)."""
    return scrubbed(error, sent_secrets(request, target))
