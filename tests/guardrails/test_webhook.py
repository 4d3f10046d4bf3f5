"""The guardrails' HTTP path: answers are size-bounded (decompressed) and JWKS fetches are shared and cached."""

from __future__ import annotations

import asyncio

import pytest

from gateway.guardrails import webhook
from gateway.guardrails.webhook import CheckIO, HttpCheckError
from tests.support.hostile import HostileUpstream, gzip_bomb, response
from tests.support.poll import await_for


async def test_a_too_large_answer_is_refused(hook_server, loopback_client, monkeypatch):
    monkeypatch.setattr(webhook, "MAX_ANSWER_BYTES", 10)
    with pytest.raises(HttpCheckError) as info:
        await CheckIO(loopback_client).post_json(f"{hook_server.url}/verdict/true", {}, {"x": 1}, 2000)
    assert "larger than 10 bytes" in str(info.value)


async def test_a_gzip_bomb_is_refused_at_the_bound_counted_decompressed(loopback_client):
    """About 1 MB that inflates to 1 GiB: refused once 1 MiB is inflated, its connection dropped."""
    bomb = gzip_bomb()
    with HostileUpstream(lambda head, body: response(200, bomb, content_encoding="gzip")) as hook:
        with pytest.raises(HttpCheckError) as info:
            await CheckIO(loopback_client).post_json(f"{hook.url}/hook", {}, {"x": 1}, 10_000)
        assert f"larger than {webhook.MAX_ANSWER_BYTES} bytes" in str(info.value)
        await await_for(lambda: hook.dropped == 1)


async def test_concurrent_jwks_misses_share_one_fetch(hook_server, loopback_client):
    io = CheckIO(loopback_client)
    url = f"{hook_server.url}/jwks"
    docs = await asyncio.gather(*(io.cached_json(url, 60, 2000) for _ in range(5)))
    assert docs == [{"keys": []}] * 5
    assert hook_server.jwks_fetches == 1
    await io.cached_json(url, 60, 2000)
    assert hook_server.jwks_fetches == 1


async def test_without_a_client_every_call_fails():
    with pytest.raises(HttpCheckError):
        await CheckIO(None).post_json("https://example.com/hook", {}, {}, 100)


async def test_an_answer_cut_off_is_described_in_words(loopback_client):
    """A hook that promises more body than it sends: the verdict says so plainly (no library class names)."""

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(HttpCheckError) as info:
            await CheckIO(loopback_client).post_json(f"http://127.0.0.1:{port}/hook", {}, {"x": 1}, 2000)
    finally:
        server.close()
        await server.wait_closed()
    message = str(info.value)
    assert "cut its answer off" in message and "Error" not in message, message
