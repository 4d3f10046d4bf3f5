"""Writing responses to ASGI: JSON bodies, errors and SSE streams, and the gateway's response headers (the one place
that writes ``x-gateway-trace-id``, ``-cache-status``, ``-last-used-option-index``, ``-retry-attempt-count`` and
``-provider``)."""

from __future__ import annotations

from typing import Protocol

from gateway.http.errors import GatewayError
from gateway.http.types import ASGIApp, Message, RawHeaders, Receive, Scope, Send

#: ``x-gateway-cache-status`` of an answer no cache applies to (every answer but an inference route's carries it)
CACHE_DISABLED = (b"x-gateway-cache-status", b"DISABLED")

#: x-gateway-cache-status values (HIT, SEMANTIC_HIT, MISS, REFRESH, DISABLED) as header pairs
CACHE_STATUS = {name: (b"x-gateway-cache-status", name.encode())
                for name in ("HIT", "SEMANTIC_HIT", "MISS", "REFRESH", "DISABLED")}
_RETRY_COUNTS = [str(n).encode() for n in range(16)]

JSON_HEADERS = ((b"content-type", b"application/json"),)
SSE_HEADERS = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)


class RouteTrail(Protocol):
    """Where routing took a request (``gateway.routing.execute.RunState``): the target's path and the retries."""

    path: str
    retries: int


def gateway_headers(trace_id: str, provider: str | None = None, cache_status: str | None = None,
                    trail: RouteTrail | None = None) -> list[tuple[bytes, bytes]]:
    """The gateway's headers on an answer: the trace id, the cache status (inference routes), the target path and
    retry count (when routing ran) and the provider that answered."""
    headers = [(b"x-gateway-trace-id", trace_id.encode("latin-1"))]
    if cache_status is not None:
        headers.append(CACHE_STATUS[cache_status])
    if trail is not None:
        headers.append((b"x-gateway-last-used-option-index", trail.path.encode()))
        retries = trail.retries
        headers.append((b"x-gateway-retry-attempt-count",
                        _RETRY_COUNTS[retries] if retries < 16 else str(retries).encode()))
    if provider:
        headers.append((b"x-gateway-provider", provider.encode()))
    return headers


async def send_bytes(send: Send, status: int, body: bytes,
                     headers: RawHeaders | tuple[tuple[bytes, bytes], ...] = JSON_HEADERS) -> None:
    """One complete response."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, body: bytes, extra_headers: RawHeaders | None = None) -> None:
    headers = list(JSON_HEADERS)
    if extra_headers:
        headers.extend(extra_headers)
    await send_bytes(send, status, body, headers)


async def send_error(send: Send, error: GatewayError, extra_headers: RawHeaders | None = None) -> None:
    """The vendorA error envelope with the error's status (the only writer of error bodies)."""
    headers = list(JSON_HEADERS)
    if error.headers:
        headers.extend(error.headers)
    if extra_headers:
        headers.extend(extra_headers)
    await send_bytes(send, error.status, error.body(), headers)


async def start_stream(send: Send, extra_headers: RawHeaders | None = None, status: int = 200) -> None:
    headers = list(SSE_HEADERS)
    if extra_headers:
        headers.extend(extra_headers)
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def send_chunk(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def end_stream(send: Send, data: bytes = b"") -> None:
    await send({"type": "http.response.body", "body": data, "more_body": False})


def with_cache_status(handler: ASGIApp) -> ASGIApp:
    """``handler`` whose answers carry ``x-gateway-cache-status: DISABLED`` unless it sent a cache status itself
    (for every route but the inference ones, which set theirs)."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers") or ()
                if not any(name == CACHE_DISABLED[0] for name, _ in headers):
                    message = {**message, "headers": [*headers, CACHE_DISABLED]}
            await send(message)

        await handler(scope, receive, send_marked)

    return answer
