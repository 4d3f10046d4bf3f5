"""The MCP gateway facing servers that fail (issue 35): slow, resetting, answering what is not JSON-RPC, not JSON,
too much or an HTML error page, or not there at all. Each tools/call through the gateway is answered as a JSON-RPC
error, which the SDK's client raises as ``MCPError``, and the gateway serves the next request as before.

A server is registered only when the gateway can read its tools (``POST``, and ``PUT`` of a new ``url``, read the
server first), so a misbehaving server cannot be registered as itself. The test registers a ``Switch``: a TCP
forwarder on loopback that passes connections to a good SDK server while the server is registered and its tools
listed, and then to the misbehaving one (``switch_to`` also cuts the connections open through it). The gateway's
lists are kept for a minute here, so the tools/call itself, not a list read, meets the misbehaviour. The gateway
waits at most ``TIMEOUT_MS`` for an answer's head and reads at most ``MAX_ANSWER`` bytes of a JSON answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Self

import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp_gateway import Tenant, connect, text
from tests.support.mcp_servers import (
    MODES,
    McpTestServer,
    Mode,
    mcp_servers,
    start_mcp_server,
    start_misbehaving_server,
)
from tests.support.servers import Server, start_gateway

TIMEOUT_MS = 2000
MAX_ANSWER = 4 << 20
#: what the JSON-RPC error says for each way of misbehaving: its code and a part of its message
SAYS = {
    "slow": (-32001, "MCP server 'flaky' did not answer within 2 s"),
    "reset": (-32000, "MCP server 'flaky' could not be reached: "),
    "invalid": (-32000, "MCP server 'flaky' ended its answer without a response"),
    "garbage": (-32603, "MCP server 'flaky' sent a message that is not JSON-RPC"),
    "huge": (-32603, f"MCP server 'flaky' sent an answer larger than {MAX_ANSWER} bytes"),
    "html": (-32603, "MCP server 'flaky' answered HTTP 502: <!DOCTYPE html>"),
}


@pytest.fixture(scope="module")
def gw() -> Iterator[Server]:
    server = start_gateway({"GATEWAY_MCP_TIMEOUT_MS": str(TIMEOUT_MS), "GATEWAY_MCP_LIST_TTL_MS": "60000",
                            "GATEWAY_MAX_UPSTREAM_BODY_BYTES": str(MAX_ANSWER)})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pair() -> Iterator[list[McpTestServer]]:
    with mcp_servers("good", "spare") as servers:
        yield servers


class Switch:
    """A TCP forwarder on 127.0.0.1 (``url``: its ``/mcp``) to the backend port set last, in an event loop thread of
    its own."""

    def __init__(self, backend: int) -> None:
        self.backend = backend
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-switch", daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def switch_to(self, backend: int) -> None:
        """Send new connections to ``backend`` and cut the ones open now."""

        async def cut() -> None:
            self.backend = backend
            for writer in list(self._open):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._open):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await asyncio.open_connection("127.0.0.1", self.backend)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, far_writer))
        try:
            await asyncio.gather(self._pipe(reader, far_writer), self._pipe(far_reader, writer))
        finally:
            self._open.difference_update((writer, far_writer))
            writer.transport.abort()
            far_writer.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
        except (ConnectionError, OSError, RuntimeError):
            writer.transport.abort()


@pytest.mark.parametrize("mode", MODES)
async def test_a_misbehaving_server_is_a_json_rpc_error_and_the_gateway_serves_on(
        gw: Server, pair: list[McpTestServer], mode: Mode) -> None:
    good, spare = pair
    tenant = Tenant(gw)
    switch = Switch(good.port).start()
    try:
        tenant.register("flaky", switch.url)
        tenant.register("spare", spare.url)
        async with connect(gw, tenant.key) as client:
            assert text(await client.call_tool("flaky__whoami", {})) == "good"  # its list is read and kept
            with start_misbehaving_server(mode) as bad:
                switch.switch_to(bad.port)
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("flaky__whoami", {})
                assert bad.requests >= 1
            code, says = SAYS[mode]
            assert failed.value.code == code and says in failed.value.message, failed.value.message
            assert text(await client.call_tool("spare__whoami", {})) == "spare"
            switch.switch_to(good.port)
            assert text(await client.call_tool("flaky__whoami", {})) == "good"
    finally:
        switch.stop()


async def test_a_server_that_is_gone_is_a_json_rpc_error(gw: Server, pair: list[McpTestServer]) -> None:
    tenant = Tenant(gw)
    with start_mcp_server("gone") as gone:
        tenant.register("gone", gone.url)
        tenant.register("spare", pair[1].url)
        async with connect(gw, tenant.key) as client:
            assert text(await client.call_tool("gone__whoami", {})) == "gone"
            gone.stop()
            with pytest.raises(MCPError) as failed:
                await client.call_tool("gone__whoami", {})
            assert failed.value.code == -32000 and "MCP server 'gone' could not be reached" in failed.value.message
            assert text(await client.call_tool("spare__whoami", {})) == "spare"
