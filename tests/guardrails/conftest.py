"""Fixtures for the guardrail tests: a real aiohttp webhook/JWKS server on loopback and an upstream client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from gateway.settings import Settings
from gateway.upstream.client import UpstreamClient


class HookServer:
    """A webhook service on 127.0.0.1: ``/verdict/true``, ``/verdict/false``, ``/slow``, ``/bad-json``,
    ``/no-verdict``, ``/status/500``, ``/jwks``; ``received`` holds each request's headers and JSON body."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self.jwks: dict[str, Any] = {"keys": []}
        self.jwks_fetches = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/verdict/{value}", self._verdict)
        app.router.add_post("/slow", self._slow)
        app.router.add_post("/bad-json", self._bad_json)
        app.router.add_post("/no-verdict", self._no_verdict)
        app.router.add_post("/status/{code}", self._status)
        app.router.add_get("/jwks", self._jwks)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _record(self, request: web.Request) -> None:
        self.received.append((dict(request.headers), await request.json()))

    async def _verdict(self, request: web.Request) -> web.Response:
        await self._record(request)
        verdict = request.match_info["value"] == "true"
        return web.json_response({"verdict": verdict, "explanation": f"webhook says {verdict}",
                                  "data": {"score": 0.5}})

    async def _slow(self, request: web.Request) -> web.Response:
        await self._record(request)
        await asyncio.sleep(5)
        return web.json_response({"verdict": True})

    async def _bad_json(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.Response(text="<html>not json</html>", content_type="text/html")

    async def _no_verdict(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"verdict": "yes"})

    async def _status(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"verdict": True}, status=int(request.match_info["code"]))

    async def _jwks(self, request: web.Request) -> web.Response:
        self.jwks_fetches += 1
        return web.json_response(self.jwks)


@pytest.fixture
async def hook_server():
    server = HookServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def loopback_client():
    """An UpstreamClient that may reach 127.0.0.1 (as GATEWAY_ALLOW_PRIVATE_HOSTS would allow)."""
    client = UpstreamClient(Settings(allow_private_hosts=("127.0.0.1",)))
    await client.start()
    yield client
    await client.close()


@pytest.fixture
async def strict_client():
    """An UpstreamClient with the default SSRF rules: loopback refused."""
    client = UpstreamClient(Settings())
    await client.start()
    yield client
    await client.close()
