"""Reading a request body from ASGI under the GATEWAY_MAX_BODY_BYTES limit."""

from __future__ import annotations

from gateway.http.errors import InvalidRequest, PayloadTooLarge
from gateway.http.types import Receive, Scope


class ClientDisconnected(Exception):
    """The client went away before its body was read."""


async def read_request_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body; 413 as soon as it is known to exceed ``limit`` (Content-Length or bytes read)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise InvalidRequest("Content-Length is not an integer", param="content-length") from None
            if declared > limit:
                raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
            break
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientDisconnected()
    body = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        return body
    parts = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)
