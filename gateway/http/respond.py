"""Writing responses to ASGI: JSON bodies, errors and SSE streams, with the gateway's response headers."""

from __future__ import annotations

from gateway.http.errors import GatewayError
from gateway.http.types import ASGIApp, Message, RawHeaders, Receive, Scope, Send

#: ``x-gateway-cache-status`` of an answer no cache applies to (every answer but an inference route's carries it)
CACHE_DISABLED = (b"x-gateway-cache-status", b"DISABLED")

JSON_HEADERS = ((b"content-type", b"application/json"),)
SSE_HEADERS = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)


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
