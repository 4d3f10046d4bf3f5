"""What ``LeanTransport`` itself decides (``gateway.upstream.lean``): the request line carries the URL's path and
query as given, a large body arrives whole after its head, a header it will not write is a 400 naming it before
anything is sent, and what it leaves to the aiohttp transport (HEAD requests, streamed bodies) still works."""

from __future__ import annotations

import asyncio
import hashlib
import io
import re

import aiohttp
import pytest

from gateway.http.errors import GatewayError
from gateway.upstream.lean import LeanResponse
from gateway.upstream.request import UpstreamRequest
from tests.support.lean import ScriptedConnection, ScriptedUpstream, answer, fetch, lean_transport

_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")


async def echo_body(conn: ScriptedConnection) -> None:
    """Answers each request with its request line and the SHA-256 of its body."""
    while True:
        try:
            head = await conn.reader.readuntil(b"\r\n\r\n")
        except Exception:  # noqa: BLE001 - the client closed the connection
            return
        length = _LENGTH.search(head)
        body = await conn.reader.readexactly(int(length.group(1))) if length else b""
        conn.upstream.requests.append(head)
        line = head.split(b"\r\n", 1)[0]
        await conn.send(answer(200, line + b"\n" + hashlib.sha256(body).hexdigest().encode()))


@pytest.mark.parametrize(("path", "line"), [
    ("/v1/chat/completions", b"POST /v1/chat/completions HTTP/1.1"),
    ("", b"POST / HTTP/1.1"),
    ("?api-version=2024-10-01", b"POST /?api-version=2024-10-01 HTTP/1.1"),
    ("/v1/models/m:generateContent?alt=sse&key=a%2Bb", b"POST /v1/models/m:generateContent?alt=sse&key=a%2Bb HTTP/1.1"),
    ("/deployments/d/chat?x=/y", b"POST /deployments/d/chat?x=/y HTTP/1.1"),
])
async def test_the_request_line_carries_the_urls_path_and_query_as_given(path, line):
    async with ScriptedUpstream(echo_body) as upstream, lean_transport() as transport:
        _, _, body = await fetch(transport, upstream.url + path)
    assert body.split(b"\n")[0] == line


@pytest.mark.parametrize("size", [0, 1, 64 * 1024, 64 * 1024 + 1, 3 * 1024 * 1024])
async def test_a_request_body_of_any_size_arrives_whole(size):
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    async with ScriptedUpstream(echo_body) as upstream, lean_transport() as transport:
        for _ in range(2):  # the connection is reused after a large body as after a small one
            _, _, body = await fetch(transport, upstream.url + "/upload", data)
            assert body.split(b"\n")[1] == hashlib.sha256(data).hexdigest().encode()
    assert upstream.connections == 1


async def test_a_header_it_will_not_write_is_a_400_naming_it_and_nothing_is_sent():
    async with ScriptedUpstream(echo_body) as upstream, lean_transport() as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url, headers={"x-ok": "1", "x-tag": "a\r\nx-injected: 1"})
    assert error.value.status == 400 and error.value.param == "x-tag"
    assert "'x-tag'" in error.value.message and "CR, LF or NUL" in error.value.message
    assert upstream.connections == 0


async def test_a_head_request_is_answered_through_the_aiohttp_transport():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\nx-kind: head\r\n\r\n")

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        resp = await transport.open(UpstreamRequest(upstream.url + "/v1/files/f", {}, b"", "HEAD"))
        assert (resp.status, resp.headers["x-kind"], resp.headers["content-length"]) == (200, "head", "1234")
        assert await resp.read_body() == b""
        resp.release()
    assert not isinstance(resp, LeanResponse)
    assert upstream.requests[0].startswith(b"HEAD /v1/files/f HTTP/1.1")


async def test_a_streamed_body_is_sent_through_the_aiohttp_transport():
    data = b"file contents " * 10_000
    async with ScriptedUpstream(echo_body) as upstream, lean_transport() as transport:
        payload = aiohttp.BytesIOPayload(io.BytesIO(data))
        resp = await transport.open(UpstreamRequest(upstream.url + "/v1/files", {}, payload))  # type: ignore[arg-type]
        body = await resp.read_body()
        resp.release()
    assert resp.status == 200 and not isinstance(resp, LeanResponse)
    assert body.split(b"\n")[1] == hashlib.sha256(data).hexdigest().encode()


async def test_cookies_an_upstream_sets_are_never_sent_back():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(answer(200, b"ok", "set-cookie: session=abc; Path=/", "set-cookie: other=1"))

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        _, headers, _ = await fetch(transport, upstream.url)
        assert headers.getall("set-cookie") == ["session=abc; Path=/", "other=1"]  # type: ignore[attr-defined]
        await fetch(transport, upstream.url)
    assert all(b"cookie" not in head.lower() for head in upstream.requests)


async def test_an_ipv6_literal_upstream_is_reached_with_its_bracketed_host():
    try:
        server = await asyncio.start_server(lambda r, w: None, "::1", 0)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine ({exc})")
    server.close()
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        await reader.readexactly(int(_LENGTH.search(head).group(1)))  # type: ignore[union-attr]
        writer.write(answer(200, b"over v6"))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "::1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with lean_transport(allow_private_hosts=("::1",)) as transport:
            assert (await fetch(transport, f"http://[::1]:{port}/v1/x"))[::2] == (200, b"over v6")
    finally:
        server.close()
    assert f"\r\nHost: [::1]:{port}\r\n".encode() in heads[0]
