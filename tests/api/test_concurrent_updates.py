"""Two admins changing one record at once, through the in-process gateway (both requests in flight together on its
loop): neither change is lost. Approvals of different tools of one MCP server both end up pinned, each with its
approval in the record and its audit line; PUTs of different fields of one saved config or provider both stay, as
do an agent's PUT and refresh; rotations of one key at once leave exactly one live secret, and a revoke at the
same time as a rotation none (docs/control-plane.md, "Concurrent updates")."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Iterator

import pytest

from tests.support.agent_cards import CardServer, card_v1
from tests.support.controlplane import api, chat, create_key
from tests.support.http import Response
from tests.support.mcp_servers import McpTestServer, start_mcp_server


@pytest.fixture
def changing() -> Iterator[McpTestServer]:
    with start_mcp_server("gamma") as server:
        yield server


@pytest.fixture
def card_server() -> Iterator[CardServer]:
    server = CardServer().start()
    server.answer(card_v1(f"{server.url}/rpc"))
    yield server
    server.stop()


def together(gateway: Any, key: str, *calls: tuple[str, str, dict[str, Any]], ok: tuple[int, ...] = (200,)
             ) -> list[Response]:
    """The calls (method, path, body) made at once: all in flight together on the gateway's loop."""
    headers = {"x-gateway-api-key": key, "content-type": "application/json"}

    async def all_of() -> list[Response]:
        return list(await asyncio.gather(*(gateway.client.request(method, path, body, headers)
                                           for method, path, body in calls)))

    answers = gateway.run(all_of())
    for answer in answers:
        assert answer.status in ok, answer.text
    return answers


def test_concurrent_approvals_of_different_tools_both_stay_pinned_and_logged(gateway, changing, caplog):
    admin = create_key(gateway)
    key = admin["key"]
    made = api(gateway, "POST", "/v1/mcp-servers", {"slug": "gamma", "url": changing.url}, key)
    assert made.status == 201, made.text
    changing.add_tool("first")
    changing.add_tool("second")
    path = "/v1/mcp-servers/gamma/tools/approve"
    with caplog.at_level(logging.INFO, logger="gateway.admin"):
        together(gateway, key, ("POST", path, {"tools": ["first"]}), ("POST", path, {"tools": ["second"]}))
    record = api(gateway, "GET", "/v1/mcp-servers/gamma", key=key).json()
    pinned = {tool["name"] for tool in record["tools"]}
    assert {"first", "second"} <= pinned
    assert sorted((a["tool"], a["change"]) for a in record["approvals"]) == [("first", "added"), ("second", "added")]
    view = {tool["name"]: tool["status"] for tool in api(gateway, "GET", "/v1/mcp-servers/gamma/tools",
                                                         key=key).json()["data"]}
    assert view["first"] == view["second"] == "approved"
    lines = [json.loads(r.getMessage().split(": ", 1)[1]) for r in caplog.records if r.name == "gateway.admin"]
    assert sorted((line["tool"], line["server"]) for line in lines) == [("first", "gamma"), ("second", "gamma")]


def test_concurrent_puts_of_different_fields_of_a_saved_config_both_stay(gateway, mock):
    admin = create_key(gateway)
    key = admin["key"]
    first, second = mock.scenario(), mock.scenario()
    made = api(gateway, "POST", "/v1/configs", {"name": "before", "config": {
        "provider": "vendorA", "api_key": "sk-config-0123456789", "custom_host": first + "/v1"}}, key)
    assert made.status == 201, made.text
    path = f"/v1/configs/{made.json()['id']}"
    changed = {"provider": "vendorA", "api_key": "sk-config-0123456789", "custom_host": second + "/v1"}
    together(gateway, key, ("PUT", path, {"name": "after"}), ("PUT", path, {"config": changed}))
    stored = api(gateway, "GET", path, key=key).json()
    assert stored["name"] == "after"
    assert stored["config"]["custom_host"] == second + "/v1"


def test_concurrent_puts_of_different_fields_of_a_provider_both_stay(gateway, mock):
    admin = create_key(gateway)
    key = admin["key"]
    base = mock.scenario()
    made = api(gateway, "POST", "/v1/providers", {"slug": "shared", "provider": "vendorA",
                                                  "api_key": "sk-provider-0123456789", "custom_host": base + "/v1"},
               key)
    assert made.status == 201, made.text
    path = "/v1/providers/shared"
    together(gateway, key, ("PUT", path, {"name": "renamed"}), ("PUT", path, {"api_version": "2024-10-21"}),
             ("PUT", path, {"vendorA_project": "proj-east"}))
    stored = api(gateway, "GET", path, key=key).json()
    assert (stored["name"], stored["api_version"], stored["vendorA_project"]) == ("renamed", "2024-10-21", "proj-east")


def test_concurrent_rotations_of_one_key_leave_exactly_one_working_secret(gateway, mock):
    admin = create_key(gateway)
    member = create_key(gateway, "member", admin["workspace_id"])
    base = mock.scenario()
    path = f"/v1/api-keys/{member['id']}/rotate"
    answers = together(gateway, admin["key"], ("POST", path, {}), ("POST", path, {}), ("POST", path, {}),
                       ok=(200, 409))
    rotated = [answer.json() for answer in answers if answer.status == 200]
    assert rotated  # one of them at least was stored
    for answer in answers:
        if answer.status == 409:
            assert answer.json()["error"]["param"] == "key_id" and "retry" in answer.json()["error"]["message"]
    working = [r["key"] for r in rotated if chat(gateway, r["key"], base).status == 200]
    assert len(working) == 1
    stored = api(gateway, "GET", f"/v1/api-keys/{member['id']}", key=admin["key"]).json()
    assert working[0].startswith(stored["key_prefix"])
    assert chat(gateway, member["key"], base).status == 401


def test_an_agents_put_and_refresh_at_once_both_stay(gateway, card_server):
    key = create_key(gateway)["key"]
    made = api(gateway, "POST", "/v1/agents", {"slug": "busy", "url": card_server.url}, key)
    assert made.status == 201, made.text
    card_server.answer(card_v1(f"{card_server.url}/rpc", name="Renamed agent"))
    together(gateway, key, ("PUT", "/v1/agents/busy", {"config": "pc-guard"}),
             ("POST", "/v1/agents/busy/refresh", {}))
    stored = api(gateway, "GET", "/v1/agents/busy", key=key).json()
    assert stored["config"] == "pc-guard" and stored["name"] == "Renamed agent"


def test_a_key_revoked_while_it_is_rotated_leaves_no_working_secret(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    for _ in range(4):  # the two requests' steps interleave differently from one run to the next
        member = create_key(gateway, "member", admin["workspace_id"])
        path = f"/v1/api-keys/{member['id']}"
        answers = together(gateway, admin["key"], ("POST", f"{path}/rotate", {}), ("DELETE", path, {}),
                           ok=(200, 404, 409))
        assert answers[1].status == 200, answers[1].text  # the revoke
        secrets = [member["key"]] + [answers[0].json()["key"]] * (answers[0].status == 200)
        assert [chat(gateway, secret, base).status for secret in secrets] == [401] * len(secrets)
        assert api(gateway, "GET", path, key=admin["key"]).status == 404
