"""Running one request through the gateway's own ASGI app in process: no socket, no HTTP hop to itself.

A batch line is a POST to its endpoint (``/v1/chat/completions``...) with the batch's headers, handed to the app
exactly as Granian would hand it, so it meets everything a client request meets (authentication, config and
routing, retries and fallbacks, cache, guardrails, limits, request logs). Its caller is the key record given as
``key`` (the scope's ``IN_PROCESS_KEY`` entry, read when the request carries no gateway key): a batch runs as the
key that created it, by id, and stores no key secret. ``call`` collects the answer whole (batch lines never stream);
``stream`` hands it on as it comes (a translated Responses WebSocket turn: ``gateway/realtime/translate.py``), and a
caller that leaves is seen by the app as a client that disconnected.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from gateway.controlplane.keys import IN_PROCESS_KEY, KeyRecord
from gateway.http.errors import GatewayError
from gateway.http.types import ASGIApp, Message, Receive

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


class StreamSink(Protocol):
    """Where ``InProcessDispatcher.stream`` hands an answer: its status and headers, then each body part in order."""

    async def start(self, status: int, headers: Headers) -> None: ...

    async def body(self, data: bytes) -> None: ...


class InProcessDispatcher:
    """Calls an ASGI app with a synthetic HTTP scope and collects its answer (``call``) or hands it on (``stream``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def call(self, method: str, path: str, headers: Headers, body: bytes,
                   key: KeyRecord | None = None) -> LocalResponse:
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

        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            await self.app(_scope(method, path, headers, body, key), _receiver(body, never), send)
        except GatewayError as error:
            return LocalResponse(error.status, list(error.headers or []), error.body())
        finally:
            if not never.done():
                never.cancel()
        return LocalResponse(status, out_headers, b"".join(parts))

    async def stream(self, method: str, path: str, headers: Headers, body: bytes, key: KeyRecord | None,
                     sink: StreamSink, left: asyncio.Future[None]) -> None:
        """Run the request, handing its answer to ``sink`` as the app sends it (a ``GatewayError`` the app raises
        is handed on as its JSON answer). ``left`` done means the caller has gone: the app's pending ``receive``
        then answers ``http.disconnect`` and its next ``send`` raises ``ConnectionResetError``, as a server does
        for a client that left; an error ``sink`` raises reaches the app's ``send`` the same way."""

        async def send(message: Message) -> None:
            if left.done():
                raise ConnectionResetError("the in-process caller left")
            kind = message["type"]
            if kind == "http.response.start":
                await sink.start(message["status"], list(message.get("headers") or []))
            elif kind == "http.response.body":
                data = message.get("body", b"")
                if data:
                    await sink.body(data)

        try:
            await self.app(_scope(method, path, headers, body, key), _receiver(body, left), send)
        except GatewayError as error:
            await sink.start(error.status, list(error.headers or []))
            await sink.body(error.body())


def _scope(method: str, path: str, headers: Headers, body: bytes, key: KeyRecord | None) -> dict[str, Any]:
    """The HTTP scope of an in-process request (``key``: the caller's key record, for a request with no key)."""
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 0), "server": None,
    }
    if key is not None:
        scope[IN_PROCESS_KEY] = key
    return scope


def _receiver(body: bytes, left: asyncio.Future[None]) -> Receive:
    """The request's ``receive``: its body in one message, then ``http.disconnect`` once ``left`` is done (the
    caller, or the end of the call, completes or cancels it)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if not left.done():
            await asyncio.shield(left)
        return {"type": "http.disconnect"}

    return receive
