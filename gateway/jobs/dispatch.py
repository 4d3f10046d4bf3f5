"""Running one request through the gateway's own ASGI app in process: no socket, no HTTP hop to itself.

A batch line is a POST to its endpoint (``/v1/chat/completions``...) with the batch's headers, handed to the app
exactly as Granian would hand it, so it meets everything a client request meets (authentication, config and
routing, retries and fallbacks, cache, guardrails, limits, request logs). Its caller is the key record given as
``key`` (the scope's ``IN_PROCESS_KEY`` entry, read when the request carries no gateway key): a batch runs as the
key that created it, by id, and stores no key secret. The answer is collected whole: batch lines never stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.controlplane.keys import IN_PROCESS_KEY, KeyRecord
from gateway.http.errors import GatewayError
from gateway.http.types import ASGIApp, Message

Headers = list[tuple[bytes, bytes]]


class LocalResponse:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Headers, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


class InProcessDispatcher:
    """Calls an ASGI app with a synthetic HTTP scope and collects its answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def call(self, method: str, path: str, headers: Headers, body: bytes,
                   key: KeyRecord | None = None) -> LocalResponse:
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 0), "server": None,
        }
        if key is not None:
            scope[IN_PROCESS_KEY] = key
        sent = False
        never: asyncio.Future | None = None

        async def receive() -> Message:
            nonlocal sent, never
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            never = never or asyncio.get_running_loop().create_future()
            await never  # the client never leaves: the call ends when the app answers
            return {"type": "http.disconnect"}

        status = 500
        out_headers: Headers = []
        parts: list[bytes] = []

        async def send(message: Message) -> None:
            nonlocal status, out_headers
            if message["type"] == "http.response.start":
                status = message["status"]
                out_headers = list(message.get("headers") or [])
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        try:
            await self.app(scope, receive, send)
        except GatewayError as error:
            return LocalResponse(error.status, list(error.headers or []), error.body())
        finally:
            if never is not None and not never.done():
                never.cancel()
        return LocalResponse(status, out_headers, b"".join(parts))
