"""An A2A agent's card for tests of the agents' control plane: an aiohttp app on 127.0.0.1, in an event loop thread
of its own, answering ``GET /.well-known/agent-card.json`` (under any base path) with what the test set last.

``card_v1(url)`` and ``card_v03(url)`` are valid cards of the two revisions the official SDK speaks (1.0 with
``supportedInterfaces``, 0.3 with a top-level ``url``), shaped as a2a-sdk 1.3.0 serves them. ``answer`` sets the
next answers (a body, a status, headers, a stream of ``stream_bytes`` zero bytes written as fast as the reader
takes them, a delay); ``requests`` keeps each request's path and headers (names lower-cased); ``streamed`` counts
what a stream got written before its reader left.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from aiohttp import web


def card_v1(endpoint: str, name: str = "Helper agent", **extra: Any) -> dict[str, Any]:
    """A valid A2A 1.0 card whose JSON-RPC endpoint is ``endpoint``."""
    return {
        "name": name, "description": "Answers questions.", "version": "1.0.0",
        "supportedInterfaces": [{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": True}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "answer", "name": "Answer", "description": "Answers a question.", "tags": ["qa"]}],
        **extra,
    }


def card_v03(endpoint: str, name: str = "Legacy agent", **extra: Any) -> dict[str, Any]:
    """A valid A2A 0.3 card whose JSON-RPC endpoint is ``endpoint``."""
    return {
        "name": name, "description": "Answers questions.", "version": "0.1.0", "url": endpoint,
        "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC", "capabilities": {},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "answer", "name": "Answer", "description": "Answers a question.", "tags": []}],
        **extra,
    }


class CardServer:
    """The agent's host; ``url`` is its base URL."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.streamed = 0
        self._answer: dict[str, Any] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.url = ""

    def answer(self, body: Any = None, status: int = 200, headers: dict[str, str] | None = None,
               stream_bytes: int = 0, delay_s: float = 0.0) -> None:
        """What the card's path answers from now on: ``body`` as JSON (bytes and str as they are)."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self._answer = {"body": body or b"", "status": status, "headers": headers or {},
                        "stream_bytes": stream_bytes, "delay_s": delay_s}

    async def _card(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, {k.lower(): v for k, v in request.headers.items()}))
        spec = self._answer
        if spec["delay_s"]:
            await asyncio.sleep(spec["delay_s"])
        if not spec["stream_bytes"]:
            return web.Response(body=spec["body"], status=spec["status"],
                                headers={"content-type": "application/json", **spec["headers"]})
        response = web.StreamResponse(status=spec["status"], headers={"content-type": "application/json"})
        await response.prepare(request)
        chunk = b"[" + b"0," * 32767 + b"0"  # 64 KiB
        self.streamed = 0
        try:
            while self.streamed < spec["stream_bytes"]:
                await response.write(chunk)
                self.streamed += len(chunk)
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the reader left
        return response

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/{base:.*}.well-known/agent-card.json", self._card)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> CardServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
