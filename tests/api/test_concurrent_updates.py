"""Two admins changing one record at once, through the in-process gateway (both requests in flight together on its
loop): neither change is lost. Approvals of different tools of one MCP server both end up pinned, each with its
approval in the record and its audit line; PUTs of different fields of one saved config or provider both stay, as
do an agent's PUT and refresh; rotations of one key at once leave exactly one live secret, and a revoke at the
same time as a rotation none; two creates of one provider or MCP server slug at once store one (with its secret) and
answer 409 to the other, and two PUTs of one prompt at once make two versions, each with its own template
(docs/control-plane.md, "Concurrent updates")."""

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


def one_created(answers: list[Response]) -> dict[str, Any]:
    """The record of the one create answered 201; the other answered 409 naming the slug."""
    assert sorted(answer.status for answer in answers) == [201, 409], [answer.text for answer in answers]
    refused = next(answer for answer in answers if answer.status == 409).json()["error"]
    assert refused["param"] == "slug" and "already exists in this workspace" in refused["message"], refused
    return dict(next(answer for answer in answers if answer.status == 201).json())


def test_two_creates_of_one_provider_slug_at_once_store_one_with_its_secret(gateway, mock):
    key = create_key(gateway)["key"]
    bases = [mock.scenario(), mock.scenario()]
    secrets = ["sk-first-create-0123456789aaaa", "sk-other-create-0123456789bbbb"]
    answers = together(gateway, key, *(("POST", "/v1/providers", {
        "slug": "raced", "provider": "vendorA", "api_key": secret, "custom_host": base + "/v1"})
        for base, secret in zip(bases, secrets)), ok=(201, 409))
    made = one_created(answers)
    winner = [base + "/v1" for base in bases].index(made["custom_host"])
    stored = api(gateway, "GET", "/v1/providers/raced", key=key).json()
    assert (stored["custom_host"], stored["api_key"]) == (made["custom_host"], made["api_key"])
    assert chat(gateway, key, **{"x-gateway-provider": "@raced"}).status == 200
    sent = mock.calls(bases[winner])["requests"][-1]["headers"]["authorization"]
    assert sent == f"Bearer {secrets[winner]}"  # the 201's secret, not the other's
    listed = api(gateway, "GET", "/v1/providers", key=key).json()
    assert [record["slug"] for record in listed["data"]] == ["raced"]


def test_two_creates_of_one_mcp_server_slug_at_once_store_one_with_its_secret(gateway, changing):
    key = create_key(gateway)["key"]
    secrets = ["first-create-secret-0123456789aaaa", "other-create-secret-0123456789bbbb"]
    for slug in ("raced-1", "raced-2", "raced-3", "raced-4"):  # each create reads the server first: the two
        # requests reach the store in a different order from one run to the next
        answers = together(gateway, key, *(("POST", "/v1/mcp-servers", {
            "slug": slug, "url": changing.url, "name": f"create {i}", "headers": {"X-Secret": secret}})
            for i, secret in enumerate(secrets)), ok=(201, 409))
        made = one_created(answers)
        winner = int(made["name"].split()[-1])
        stored = api(gateway, "GET", f"/v1/mcp-servers/{slug}", key=key).json()
        assert (stored["name"], stored["headers"]) == (made["name"], made["headers"])
        changing.clear_received()
        view = api(gateway, "GET", f"/v1/mcp-servers/{slug}/tools", key=key)
        assert view.status == 200 and "upstream_error" not in view.json(), view.text
        sent = {request.headers.get("x-secret") for request in changing.received()}
        assert sent == {secrets[winner]}  # the 201's secret, not the other's
    listed = api(gateway, "GET", "/v1/mcp-servers", key=key).json()
    assert sorted(record["slug"] for record in listed["data"]) == ["raced-1", "raced-2", "raced-3", "raced-4"]


def test_two_puts_of_one_prompt_at_once_make_two_versions_each_with_its_own_template(gateway):
    key = create_key(gateway)["key"]
    made = api(gateway, "POST", "/v1/prompts", {"name": "raced", "model": "gpt-4o-mini",
                                                "messages": [{"role": "user", "content": "v1 {{x}}"}]}, key)
    assert made.status == 201, made.text
    path = f"/v1/prompts/{made.json()['id']}"
    sent = ["first PUT {{x}}", "other PUT {{x}}"]
    for _ in range(3):  # the two requests' steps interleave differently from one run to the next
        answers = together(gateway, key, *(("PUT", path, {"messages": [{"role": "user", "content": content}]})
                                           for content in sent))
        versions = {answer.json()["version"]: answer.json()["messages"][0]["content"] for answer in answers}
        assert sorted(versions.values()) == sent  # two versions, each answered with its own template
        for number, content in versions.items():
            stored = api(gateway, "GET", f"{path}/versions/{number}", key=key).json()
            assert stored["messages"][0]["content"] == content
        current = api(gateway, "GET", path, key=key).json()
        assert current["version"] == max(versions)
        assert current["messages"][0]["content"] == versions[current["version"]]
    listed = api(gateway, "GET", f"{path}/versions", key=key).json()
    assert [version["version"] for version in listed["data"]] == list(range(1, 8))
