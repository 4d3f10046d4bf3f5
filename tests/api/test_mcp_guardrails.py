"""Guardrails on MCP tool calls (docs/mcp.md, "Guardrails"): the config's input guardrails judge a call's arguments
before the server sees them, its output guardrails the tool's result before the client does, a deny reaches the
official ``mcp`` SDK as an ``MCPError`` naming the guardrail, and a redaction rewrites what the server receives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.controlplane import api
from tests.support.mcp_servers import McpTestServer, start_mcp_server
from tests.support.servers import ADMIN_KEY, Server, start_gateway

DENY_WORD = {"id": "no-secrets", "deny": True, "default.contains": {"words": ["forbidden"], "operator": "none"}}
DENY_LEAK = {"id": "no-leaks", "deny": True, "default.contains": {"words": ["leak"], "operator": "none"}}
CONFIG = {"input_guardrails": [DENY_WORD], "output_guardrails": [DENY_LEAK]}
GUARDRAIL_DENIED = -32010


@pytest.fixture(scope="module")
def gw() -> Iterator[Server]:
    server = start_gateway()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[McpTestServer]:
    with start_mcp_server("guarded") as running:
        yield running


def register(gw: Server, server: McpTestServer, slug: str, **fields: Any) -> None:
    made = api(gw, "POST", "/v1/mcp-servers", {"slug": slug, "url": server.url, **fields})
    assert made.status == 201, made.text


async def calls(gw: Server, path: str, mode: str, texts: list[str], config: dict | None = None) -> list[Any]:
    """Call ``echo`` with each text through the SDK client; each result's text or the MCPError raised."""
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    if config is not None:
        headers["x-gateway-config"] = json.dumps(config)
    out: list[Any] = []
    async with Client(streamable_http_client(gw.url + path, http_client=httpx2.AsyncClient(headers=headers,
                                                                                           timeout=30)),
                      mode=mode) as client:
        for text in texts:
            try:
                result = await client.call_tool("echo", {"text": text})
                out.append(result.content[0].text)
            except MCPError as exc:
                out.append(exc)
    return out


def echoed(server: McpTestServer) -> list[str]:
    return [r.body["params"]["arguments"]["text"] for r in server.received(50)
            if isinstance(r.body, dict) and r.body.get("method") == "tools/call"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_requests_config_denies_before_and_after_the_call_naming_the_guardrail(gw, server, mode):
    register(gw, server, f"g-{mode}")
    server.clear_received()
    fine, before, after = await calls(gw, f"/v1/mcp/g-{mode}", mode, ["hello", "a forbidden word", "a leak"], CONFIG)
    assert fine == "hello"
    assert isinstance(before, MCPError) and before.error.code == GUARDRAIL_DENIED
    assert "no-secrets" in before.error.message and before.error.data["guardrail"] == "no-secrets"
    assert isinstance(after, MCPError) and "no-leaks" in after.error.message
    # the denied input never reached the server; the output was judged after the server answered
    assert echoed(server) == ["hello", "a leak"]


async def test_the_servers_own_config_applies_when_the_request_names_none(gw, server):
    register(gw, server, "g-own", config=json.dumps({"input_guardrails": [DENY_WORD]}))
    results = await calls(gw, "/v1/mcp/g-own", "auto", ["ok", "forbidden"])
    assert results[0] == "ok"
    assert isinstance(results[1], MCPError) and "no-secrets" in results[1].error.message


async def test_a_redacting_guardrail_rewrites_the_arguments_the_server_receives(gw, server):
    register(gw, server, "g-pii")
    server.clear_received()
    config = {"input_guardrails": [{"id": "pii", "default.pii": {"redact": True}}]}
    [answer] = await calls(gw, "/v1/mcp/g-pii", "auto", ["mail me at jane.doe@example.com please"], config)
    [sent] = echoed(server)
    assert "jane.doe@example.com" not in sent and "jane.doe@example.com" not in answer


async def test_a_config_that_does_not_parse_is_a_json_rpc_error_naming_the_header(gw, server):
    register(gw, server, "g-bad")
    bad = {"input_guardrails": [{"id": "x", "default.nosuchcheck": {}}]}
    [result] = await calls(gw, "/v1/mcp/g-bad", "auto", ["hi"], bad)
    assert isinstance(result, MCPError) and "x-gateway-config" in result.error.message
