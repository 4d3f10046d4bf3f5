"""The gateway as an MCP client (``gateway/mcp/upstream.py``) against real SDK servers and misbehaving ones: which
protocol revision it learns per server, a handshake-era session that expired replaced once, lists read whole, and
what a failing server turns into (a JSON-RPC error naming it, its credentials masked)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gateway.mcp import wire
from gateway.mcp.target import ServerTarget
from gateway.mcp.upstream import Era, McpUpstream
from tests.support.lean import lean_transport
from tests.support.mcp_servers import McpTestServer, start_mcp_server, start_misbehaving_server

SECRET = "Bearer sekrit-token-0123456789"


@pytest.fixture(scope="module")
def both() -> Iterator[McpTestServer]:
    with start_mcp_server("both-eras") as server:
        yield server


@pytest.fixture(scope="module")
def elder() -> Iterator[McpTestServer]:
    with start_mcp_server("elder", era="legacy") as server:
        yield server


def target(url: str, slug: str = "s", **headers: str) -> ServerTarget:
    return ServerTarget(slug=slug, workspace="w", url=url, headers=headers)


async def test_a_server_of_both_eras_is_spoken_to_statelessly_and_an_old_one_through_a_session(both, elder):
    async with lean_transport() as transport:
        upstream = McpUpstream(transport, timeout_s=10, max_bytes=1 << 20)
        modern = await upstream.era(target(both.url))
        assert modern.modern and modern.session is None
        old = await upstream.era(target(elder.url, "elder"))
        assert old.version == "2025-11-25" and old.session
        for server, slug in ((both, "s"), (elder, "elder")):
            tools = await upstream.list_tools(target(server.url, slug))
            assert {"add", "echo"} <= {tool["name"] for tool in tools}
        sent = [r for r in elder.received(20) if r.jsonrpc_method == "tools/list"][-1]
        assert sent.headers.get("mcp-session-id") == old.session
        assert "_meta" not in (sent.body.get("params") or {})  # no 2026-07-28 envelope for a 2025 server


async def test_an_expired_session_is_replaced_once_and_the_request_sent_again(elder):
    async with lean_transport() as transport:
        upstream = McpUpstream(transport, timeout_s=10, max_bytes=1 << 20)
        old = target(elder.url, "elder")
        await upstream.era(old)
        upstream._eras[upstream._key(old)] = Era("2025-11-25", "expired-session-id", time.monotonic())
        result = await upstream.request(old, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        assert result["structuredContent"] == {"result": 5}
        assert (await upstream.era(old)).session not in (None, "expired-session-id")


@pytest.mark.parametrize("mode", ["reset", "invalid", "html", "garbage"])
async def test_a_failing_server_is_a_json_rpc_error_naming_it_with_its_credentials_masked(mode):
    with start_misbehaving_server(mode) as bad:
        async with lean_transport() as transport:
            upstream = McpUpstream(transport, timeout_s=5, max_bytes=1 << 20)
            with pytest.raises(wire.RpcError) as failed:
                await upstream.list_all(target(bad.url, "broken", authorization=SECRET), "tools/list", "tools")
    assert "MCP server 'broken'" in failed.value.message
    assert "sekrit" not in failed.value.message and len(failed.value.message) <= 1100
    assert bad.url.split("//")[1].split("/")[0] not in failed.value.message  # its address is the admin's


async def test_a_silent_server_times_out_and_a_huge_answer_is_cut(both):
    with start_misbehaving_server("slow") as slow, start_misbehaving_server("huge") as huge:
        async with lean_transport(max_upstream_body_bytes=1 << 20) as transport:
            upstream = McpUpstream(transport, timeout_s=0.5, max_bytes=1 << 20)
            started = time.monotonic()
            with pytest.raises(wire.RpcError) as silent:
                await upstream.request(target(slow.url, "slow"), "tools/list")
            assert silent.value.code == wire.REQUEST_TIMEOUT and time.monotonic() - started < 5
            with pytest.raises(wire.RpcError) as big:
                await upstream.request(target(huge.url, "huge"), "tools/list")
            assert "MCP server 'huge'" in big.value.message and str(1 << 20) in big.value.message, big.value.message
            # the transport still serves a good server afterwards
            upstream.timeout_s = 10
            assert await upstream.list_tools(target(both.url))


async def test_a_streamed_answer_gives_its_connection_back_to_the_pool(both):
    """An answer the server streamed (progress, then the result) is read to its end after the response, so the
    next request reuses the connection instead of opening one per call."""
    async with lean_transport() as transport:
        upstream = McpUpstream(transport, timeout_s=10, max_bytes=1 << 20)
        server = target(both.url)
        for _ in range(3):
            answer = await upstream.send(server, wire.Message(
                jsonrpc="2.0", id=1, method="tools/call",
                params={"name": "slow", "arguments": {"n": 1, "delay": 0}, "_meta": {"progressToken": 1}}))
            assert answer.streamed
            async for message in answer.messages():  # stop at the response, as the relay does
                if message.startswith(b'{"jsonrpc":"2.0","id":1,'):
                    break
            await answer.drain()
            assert transport.pool.idle_count() == 1
