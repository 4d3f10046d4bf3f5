"""Drive the gateway's ASGI app in-process: a runtime and the app, as a worker builds them, without a Granian
subprocess (for settings-only variations, and for tests that inject a clock or a store into the runtime)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from gateway.app import GatewayApp
from gateway.runtime import Runtime
from gateway.settings import load
from tests.support.http import Response
from tests.support.servers import ADMIN_KEY


async def call(app, method: str, path: str, body: bytes | dict = b"", headers: dict[str, str] | None = None
               ) -> Response:
    if isinstance(body, dict):
        body = msgspec.json.encode(body)
    path, _, query = path.partition("?")
    scope = {
        "type": "http", "method": method, "path": path, "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    sent = False
    out = Response(0, {}, b"")

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
            out.header_list = [(k.decode().lower(), v.decode()) for k, v in message["headers"]]
            out.headers = dict(out.header_list)
        elif message["type"] == "http.response.body":
            out.body += message.get("body", b"")

    await app(scope, receive, send)
    return out


@asynccontextmanager
async def in_process(env: dict[str, str] | None = None, data_dir: str | None = None,
                     **runtime: Any) -> AsyncIterator[GatewayApp]:
    """The app over a started runtime with the settings ``start_gateway`` gives a subprocess (plus ``env``);
    ``runtime`` goes to ``Runtime`` (a store, a clock). Closed on exit."""
    settings = load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1,localhost,::1",
                     "GATEWAY_DATA_DIR": data_dir or tempfile.mkdtemp(prefix="gw-data-"), **(env or {})})
    started = Runtime(settings, **runtime)
    await started.start()
    try:
        yield GatewayApp(started)
    finally:
        await started.close()
