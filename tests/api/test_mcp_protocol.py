"""The MCP endpoints' protocol surface (docs/mcp.md, "The two endpoints and the names", "Protocol revisions",
"Errors and bounds"): resources and prompts on both endpoints through the official SDK, and, sent raw as any client
may send them, the envelope's checks, sessions owned by their key, the methods the gateway answers itself and the
errors every malformed request gets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.controlplane import api, create_key
from tests.support.mcp_servers import McpTestServer, start_mcp_server
from tests.support.poll import wait_for
from tests.support.servers import ADMIN_KEY, Server, start_gateway

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def gw() -> Iterator[Server]:
    server = start_gateway()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(gw: Server) -> Iterator[McpTestServer]:
    with start_mcp_server("proto") as running:
        made = api(gw, "POST", "/v1/mcp-servers", {"slug": "proto", "url": running.url})
        assert made.status == 201, made.text
        yield running


@asynccontextmanager
async def connect(gw: Server, path: str, mode: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    async with http, Client(streamable_http_client(gw.url + path, http_client=http), mode=mode, cache=None) as client:
        yield client


async def post(gw: Server, path: str, body: Any, key: str = ADMIN_KEY, **headers: str) -> httpx2.Response:
    sent = {"authorization": f"Bearer {key}", "content-type": "application/json",
            "accept": "application/json, text/event-stream", **headers}
    async with httpx2.AsyncClient(timeout=30) as http:
        if isinstance(body, bytes):
            return await http.post(gw.url + path, content=body, headers=sent)
        return await http.post(gw.url + path, json=body, headers=sent)


def modern(method: str, id: Any = 1, **params: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 request and the routing headers that go with it."""
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if "name" in params:
        headers["mcp-name"] = params["name"]
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": META}}, headers


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_and_prompts_are_served_on_both_endpoints(gw, server, mode):
    async with connect(gw, "/v1/mcp/proto", mode) as client:
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["resource://proto/readme"]
        read = await client.read_resource("resource://proto/readme")
        assert "proto" in read.contents[0].text
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == ["greet"]
        greeting = await client.get_prompt("greet", {"name": "Ada"})
        assert "Ada" in greeting.messages[0].content.text
        if mode == "legacy":  # ping is gone from 2026-07-28 (the SDK warns); the gateway still answers it
            await client.send_ping()
    async with connect(gw, "/v1/mcp", mode) as client:
        assert "proto__greet" in [p.name for p in (await client.list_prompts()).prompts]
        greeting = await client.get_prompt("proto__greet", {"name": "Ada"})
        assert "Ada" in greeting.messages[0].content.text
        read = await client.read_resource("resource://proto/readme")
        assert "proto" in read.contents[0].text
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("resource://nowhere/at-all")
        assert unknown.value.error.code == -32602


async def test_the_envelope_must_agree_with_its_headers_and_name_a_served_version(gw, server):
    body, headers = modern("tools/call", name="add", arguments={"a": 1, "b": 2})
    wrong_name = await post(gw, "/v1/mcp/proto", body, **{**headers, "mcp-name": "echo"})
    assert wrong_name.status_code == 400 and wrong_name.json()["error"]["code"] == -32020
    wrong_method = await post(gw, "/v1/mcp/proto", body, **{**headers, "mcp-method": "tools/list"})
    assert wrong_method.json()["error"]["code"] == -32020
    future = {**body, "params": {**body["params"], "_meta": {**META, "io.modelcontextprotocol/protocolVersion":
                                                             "2099-01-01"}}}
    unsupported = await post(gw, "/v1/mcp/proto", future, **{**headers, "mcp-protocol-version": "2099-01-01"})
    assert unsupported.status_code == 400
    error = unsupported.json()["error"]
    assert error["code"] == -32022 and error["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
    ok = await post(gw, "/v1/mcp/proto", body, **headers)
    assert ok.status_code == 200 and ok.json()["result"]["structuredContent"] == {"result": 3}


async def test_malformed_requests_get_json_rpc_errors_with_their_status(gw, server):
    parse = await post(gw, "/v1/mcp", b"{nope")
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
    batch = await post(gw, "/v1/mcp", [modern("ping")[0]])
    assert batch.status_code == 400 and "batches" in batch.json()["error"]["message"]
    body, headers = modern("sampling/createMessage")
    unknown = await post(gw, "/v1/mcp", body, **headers)
    assert unknown.status_code == 404 and unknown.json() == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32601, "message": unknown.json()["error"]["message"]}}
    no_session = await post(gw, "/v1/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert no_session.status_code == 400 and "initialize" in no_session.json()["error"]["message"]
    body, headers = modern("ping", id="p-1")
    pong = await post(gw, "/v1/mcp", body, **headers)
    assert pong.json() == {"jsonrpc": "2.0", "id": "p-1", "result": {}}
    body, headers = modern("server/discover")
    discover = (await post(gw, "/v1/mcp", body, **headers)).json()["result"]
    assert discover["supportedVersions"] == [MODERN] and "tools" in discover["capabilities"]
    async with httpx2.AsyncClient(timeout=30) as http:
        stream = await http.get(gw.url + "/v1/mcp", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert stream.status_code == 405 and "POST" in stream.headers["allow"]


async def test_a_session_belongs_to_the_key_and_endpoint_that_opened_it_and_ends_on_delete(gw, server):
    client = {"name": "t", "version": "1"}
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}}
    opened = await post(gw, "/v1/mcp", hello)
    assert opened.status_code == 200 and opened.json()["result"]["protocolVersion"] == "2025-11-25"
    session = opened.headers["mcp-session-id"]
    listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    sent = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    assert (await post(gw, "/v1/mcp", listed, **sent)).status_code == 200
    initialized = await post(gw, "/v1/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, **sent)
    assert initialized.status_code == 202
    other = create_key(gw, role="admin", workspace="default")["key"]  # same workspace, another key
    stolen = await post(gw, "/v1/mcp", listed, key=other, **sent)
    assert stolen.status_code == 404 and stolen.json()["error"]["message"] == "Session not found"
    elsewhere = await post(gw, "/v1/mcp/proto", listed, **sent)
    assert elsewhere.status_code == 404
    async with httpx2.AsyncClient(timeout=30) as http:
        ended = await http.delete(gw.url + "/v1/mcp", headers={"authorization": f"Bearer {ADMIN_KEY}", **sent})
    assert ended.status_code == 200
    assert (await post(gw, "/v1/mcp", listed, **sent)).status_code == 404
    old = {**hello, "params": {**hello["params"], "protocolVersion": "2024-01-01"}}
    assert (await post(gw, "/v1/mcp", old)).json()["result"]["protocolVersion"] == "2025-11-25"


async def test_a_key_with_a_tool_list_reaches_only_the_servers_it_names_and_a_refused_call_is_logged(gw, server):
    """Prompts and resources follow the key's ``mcp_tools`` by server: a server the list does not name is as
    missing as another workspace's; a call refused before any server saw it is a request record all the same."""
    member = create_key(gw, role="member", workspace="default", mcp_tools=["other-server"])["key"]
    body, headers = modern("prompts/list")
    hidden = await post(gw, "/v1/mcp/proto", body, key=member, **headers)
    assert hidden.status_code == 404
    combined = await post(gw, "/v1/mcp", body, key=member, **headers)
    assert combined.json()["result"]["prompts"] == []
    body, headers = modern("tools/call", id="c-1", name="proto__add", arguments={"a": 1, "b": 1})
    refused = await post(gw, "/v1/mcp", body, key=member, **headers)
    assert refused.json()["error"]["code"] == -32602

    def logged() -> dict | None:
        found = [r for r in api(gw, "GET", "/v1/logs?provider=mcp:proto&limit=50").json()["data"]
                 if r["metadata"].get("mcp_error_code") == -32602]
        return found[0] if found else None

    record = wait_for(logged, 8.0, 0.1)
    assert (record["endpoint"], record["model"], record["status"]) == ("mcp.tools/call", "add", 400)
