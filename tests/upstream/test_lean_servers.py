"""The lean transport (``gateway.upstream.lean``) against real servers: aiohttp's and Granian (serving
``tests/support/asgi_upstream.py``). JSON answers, chunked SSE streams and gzip/deflate/br bodies read as sent, the
request's head as the server sees it, keep-alive connections reused and ``Connection: close`` ones not, and the SSRF
guard refusing a loopback upstream that is not allow-listed (403) before anything is sent."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from aiohttp import web

from gateway.http.errors import GatewayError
from gateway.settings import Settings
from gateway.upstream.lean import LeanTransport
from gateway.upstream.request import UpstreamRequest
from tests.support import asgi_upstream
from tests.support.asgi_upstream import JSON, TEXT
from tests.support.lean import fetch, lean_transport
from tests.support.servers import free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]


def _aiohttp_app() -> web.Application:
    """The routes of ``asgi_upstream`` written for aiohttp's server."""

    def peer(request: web.Request) -> dict[str, str]:
        assert request.transport is not None
        return {"x-peer-port": str(request.transport.get_extra_info("peername")[1])}

    async def json(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=msgspec.json.encode(JSON), content_type="application/json", headers=peer(request))

    async def sse(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", **peer(request)})
        await resp.prepare(request)
        for i in range(int(request.query.get("events", 3))):
            await resp.write(b"data: {\"n\": %d}\n\n" % i)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def encoded(coding: str) -> web.RequestHandler:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(body=asgi_upstream.ENCODED[f"/{coding}"][1], content_type="text/plain",
                                headers={"content-encoding": coding, **peer(request)})
        return handler

    async def close(request: web.Request) -> web.Response:
        resp = await json(request)
        resp.force_close()
        return resp

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=msgspec.json.encode({k.lower(): v for k, v in request.headers.items()}),
                            content_type="application/json", headers=peer(request))

    async def compressed(request: web.Request) -> web.Response:
        resp = web.Response(body=TEXT, content_type="text/plain", headers=peer(request))
        resp.enable_compression()  # aiohttp picks the coding from the request's Accept-Encoding
        return resp

    app = web.Application()
    for path, handler in [("/json", json), ("/sse", sse), ("/close", close), ("/echo", echo),
                          ("/compressed", compressed), *[(f"/{c}", encoded(c)) for c in ("gzip", "deflate", "br")]]:
        app.router.add_route("*", path, handler)
    return app


@pytest.fixture(scope="module")
def aiohttp_server() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="aiohttp-upstream", daemon=True)
    thread.start()
    runner = web.AppRunner(_aiohttp_app())
    asyncio.run_coroutine_threadsafe(runner.setup(), loop).result(10)
    site = web.TCPSite(runner, "127.0.0.1", 0)
    asyncio.run_coroutine_threadsafe(site.start(), loop).result(10)
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.fixture(scope="module")
def granian_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port),
         "--no-ws", "--workers", "1", "tests.support.asgi_upstream:app"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(params=["aiohttp", "granian"])
def server(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_server")


async def test_a_json_answer_reads_as_sent(server):
    async with lean_transport() as transport:
        status, headers, body = await fetch(transport, server + "/json")
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    assert msgspec.json.decode(body) == JSON


async def test_a_chunked_sse_stream_reads_event_by_event_to_its_end(server):
    async with lean_transport() as transport:
        resp = await transport.open(UpstreamRequest(server + "/sse?events=20", {}, b"{}"), stream=True)
        assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
        assert "content-length" not in resp.headers
        received = b"".join([piece async for piece in resp.chunks()])
        resp.release()
        assert (await fetch(transport, server + "/json"))[0] == 200
    expected = b"".join(b"data: {\"n\": %d}\n\n" % i for i in range(20)) + b"data: [DONE]\n\n"
    assert received == expected


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
async def test_an_encoded_body_reads_decoded_whole_and_as_a_stream(server, coding):
    async with lean_transport() as transport:
        status, headers, body = await fetch(transport, f"{server}/{coding}")
        assert (status, headers["content-encoding"], body) == (200, coding, TEXT)
        resp = await transport.open(UpstreamRequest(f"{server}/{coding}", {}, b"{}"), stream=True)
        assert b"".join([piece async for piece in resp.chunks(1000)]) == TEXT
        resp.release()


async def test_aiohttp_compressing_by_the_requests_accept_encoding_reads_decoded(aiohttp_server):
    async with lean_transport() as transport:
        status, headers, body = await fetch(transport, aiohttp_server + "/compressed")
    assert status == 200 and headers["content-encoding"] in ("gzip", "deflate", "br")
    assert body == TEXT


async def test_keep_alive_connections_are_reused(server):
    async with lean_transport() as transport:
        ports = {(await fetch(transport, server + "/json"))[1]["x-peer-port"] for _ in range(5)}
        resp = await transport.open(UpstreamRequest(server + "/sse", {}, b"{}"), stream=True)
        ports.add(resp.headers["x-peer-port"])
        async for _ in resp.chunks():
            pass
        resp.release()
        ports.add((await fetch(transport, server + "/gzip"))[1]["x-peer-port"])
    assert len(ports) == 1


async def test_a_connection_close_answer_is_not_reused(server):
    async with lean_transport() as transport:
        first = (await fetch(transport, server + "/close"))[1]["x-peer-port"]
        second = (await fetch(transport, server + "/close"))[1]["x-peer-port"]
        third = (await fetch(transport, server + "/json"))[1]["x-peer-port"]
    assert len({first, second, third}) == 3


async def test_the_server_sees_the_requests_own_headers_and_the_defaults_it_did_not_name(server):
    async with lean_transport() as transport:
        _, _, body = await fetch(transport, server + "/echo", b'{"a":1}',
                                 {"authorization": "Bearer sk-1", "content-type": "application/json",
                                  "content-length": "999", "connection": "upgrade", "x-custom": "value"})
        _, _, own = await fetch(transport, server + "/echo", b"",
                                {"user-agent": "sdk/1.0", "host": "api.example"}, method="GET")
    seen = msgspec.json.decode(body)
    assert seen["authorization"] == "Bearer sk-1" and seen["x-custom"] == "value"
    assert seen["content-length"] == "7" and seen.get("connection", "keep-alive") != "upgrade"
    assert seen["host"] == server.removeprefix("http://")
    assert seen["user-agent"].startswith("gateway/") and "gzip" in seen["accept-encoding"]
    own = msgspec.json.decode(own)
    assert (own["user-agent"], own["host"]) == ("sdk/1.0", "api.example")
    assert "content-length" not in own


async def test_a_loopback_upstream_not_allow_listed_is_refused_with_403(server):
    transport = LeanTransport(Settings())
    await transport.start()
    try:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, server + "/json")
    finally:
        await transport.close()
    assert error.value.status == 403
    assert "127.0.0.1" in error.value.message and "loopback" in error.value.message


async def test_a_port_nobody_listens_on_is_a_502_in_words():
    async with lean_transport() as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, f"http://127.0.0.1:{free_port()}/json")
    assert error.value.status == 502
    assert "connection refused" in error.value.message
