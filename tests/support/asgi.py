"""Drive the gateway's ASGI app in-process (for tests that inject a clock or a store into the runtime)."""

from __future__ import annotations

from typing import Any

import msgspec


class AsgiResponse:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


async def call(app, method: str, path: str, body: bytes | dict = b"", headers: dict[str, str] | None = None
               ) -> AsgiResponse:
    if isinstance(body, dict):
        body = msgspec.json.encode(body)
    scope = {
        "type": "http", "method": method, "path": path, "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    sent = False
    out = AsgiResponse()

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        import asyncio

        await asyncio.sleep(3600)

    async def send(message):
        if message["type"] == "http.response.start":
            out.status = message["status"]
            out.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            out.body += message.get("body", b"")

    await app(scope, receive, send)
    return out
