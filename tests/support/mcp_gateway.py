"""Helpers for the MCP gateway's end-to-end tests (``tests/api/test_mcp*.py``): a workspace of a test's own with its
admin key (``Tenant``), the official SDK's client pointed at the gateway with a gateway key (``connect``), the same
request without the SDK (``raw_post``), and small readers of what came back.

The SDK's client (mcp 2.3.0) runs without its response cache (``cache=None``): what it lists is what the gateway
answered then, so a test that waits for a list to change sees the gateway's change, not the cache's expiry.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.support import controlplane
from tests.support.mcp_servers import McpTestServer
from tests.support.poll import wait_for
from tests.support.servers import Server

#: the tools of every SDK test server (tests/support/mcp_server_app.py)
TOOLS = {"add", "echo", "slow", "big", "fail", "whoami"}
#: the protocol version the SDK's client speaks per ``mode``
ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}
_ACCEPT = "application/json, text/event-stream"


class Tenant(controlplane.Tenant):
    """A workspace of its own with its admin key (``key``), which holds ``mcp.invoke`` as every admin key does."""

    records = "/v1/mcp-servers"

    def wait_logs(self, count: int) -> Any:
        """``GET /v1/logs`` of the workspace once it lists ``count`` tool calls (records show within 5 s)."""

        def listed() -> Any:
            answer = self.admin("GET", "/v1/logs?limit=100")
            assert answer.status == 200, answer.text
            calls = [r for r in answer.json()["data"] if r["endpoint"] == "mcp.tools/call"]
            return answer if len(calls) >= count else None

        return wait_for(listed, 8.0, 0.1)


@asynccontextmanager
async def connect(gw: Server, key: str, path: str = "/v1/mcp", mode: str = "auto",
                  http: httpx2.AsyncClient | None = None) -> AsyncIterator[Client]:
    """The SDK client on ``path`` with ``Authorization: Bearer <key>``, as MCP clients send a gateway key (``http``:
    a client of the caller's own, which must send that header)."""
    http = http or httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=60)
    async with http, Client(streamable_http_client(gw.url + path, http_client=http), mode=mode, cache=None) as client:
        yield client


async def raw_post(gw: Server, path: str, headers: dict[str, str], body: dict[str, Any] | None = None
                   ) -> httpx2.Response:
    """One MCP request as any client sends it (a 2026-07-28 ``tools/list`` by default), without the SDK."""
    body = body or {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}}
    sent = {"content-type": "application/json", "accept": _ACCEPT, "mcp-protocol-version": "2026-07-28",
            "mcp-method": body["method"], **headers}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(gw.url + path, json=body, headers=sent)


def handshake_headers(key: str, session: str) -> dict[str, str]:
    """What a 2025-11-25 client sends with every request after ``initialize``."""
    return {"authorization": f"Bearer {key}", "mcp-session-id": session, "mcp-protocol-version": "2025-11-25",
            "accept": _ACCEPT}


async def open_session(http: httpx2.AsyncClient, url: str, key: str) -> str:
    """A 2025-11-25 ``initialize`` at ``url`` with ``key``: the session id the gateway answers with."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    opened = await http.post(url, json=hello, headers={"authorization": f"Bearer {key}", "accept": _ACCEPT})
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def text(result: CallToolResult) -> str:
    """The text of a tool result's first block."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


async def names(client: Client) -> set[str]:
    """The names of the tools the gateway lists to ``client`` now."""
    return {tool.name for tool in (await client.list_tools()).tools}


def calls_received(server: McpTestServer, tool: str | None = None) -> list[Any]:
    """The ``tools/call`` requests (of ``tool``, when given) among the server's last 50 requests."""
    return [r for r in server.received(50) if r.jsonrpc_method == "tools/call"
            and (tool is None or r.body["params"]["name"] == tool)]


async def progress_before_result(client: Client, tool: str) -> None:
    """A call that reports progress (three notifications 0.1 s apart, then the result): every notification reaches
    the client before the result does, and as it comes (the first well before the result), not held back."""
    seen: list[tuple[float, float | None, str | None]] = []
    arrived: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        arrived.append(time.monotonic())

    result = await client.call_tool(tool, {"n": 3, "delay": 0.1}, progress_callback=on_progress)
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]
    assert text(result) == "done"
    assert time.monotonic() - arrived[0] >= 0.15
