"""``/v1/agents`` through the in-process gateway against an agent's card served on loopback
(tests/support/agent_cards.py): create reads and validates the card (1.0 and 0.3 cards; over 1 MB, not JSON, not an
object, no name, no url, bad skills, no JSON-RPC endpoint refused and nothing stored), headers are sealed and never
in an answer or a log line, metadata addresses and redirects are refused, PUT and refresh read the card again,
another workspace sees nothing and a key without ``agents.write`` changes nothing (docs/control-plane.md,
"Agents")."""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

import pytest

from gateway.controlplane import agent_cards
from tests.support.a2a_agent import start_a2a_agent
from tests.support.agent_cards import CardServer, card_v03, card_v1
from tests.support.controlplane import api, create_key, created, error_of

TOKEN = "Bearer agent-alpha-secret-0123456789abcdef"


@pytest.fixture
def agent() -> Iterator[CardServer]:
    server = CardServer().start()
    server.answer(card_v1(f"{server.url}/rpc"))
    yield server
    server.stop()


def create(gateway: Any, key: str, **body: Any) -> dict[str, Any]:
    return created(gateway, "/v1/agents", key, **body)


def test_create_reads_the_card_and_keeps_the_headers_sealed(gateway, agent, caplog):
    admin = create_key(gateway)
    key = admin["key"]
    with caplog.at_level(logging.DEBUG):
        made = create(gateway, key, slug="@alpha", url=agent.url, headers={"Authorization": TOKEN})
    assert made["object"] == "agent" and made["slug"] == made["id"] == "alpha"
    assert made["workspace_id"] == admin["workspace_id"] and made["url"] == agent.url
    assert made["headers"] == {"Authorization": "Bea****cdef"}
    assert made["name"] == "Helper agent" and made["card"] == card_v1(f"{agent.url}/rpc")
    assert (made["endpoint"], made["protocol_version"]) == (f"{agent.url}/rpc", "1.0")
    assert made["card_fetched_at"] and made["config"] is None
    path, headers = agent.requests[-1]
    assert path == "/.well-known/agent-card.json" and headers["authorization"] == TOKEN  # its own credential
    answers = [made, api(gateway, "GET", "/v1/agents/alpha", key=key).json(),
               api(gateway, "GET", "/v1/agents", key=key).json(),
               api(gateway, "PUT", "/v1/agents/alpha", {"config": "pc-guard"}, key).json(),
               api(gateway, "POST", "/v1/agents/alpha/refresh", key=key).json()]
    for answer in answers:
        assert "agent-alpha-secret" not in json.dumps(answer) and "sealed" not in json.dumps(answer)
    assert "agent-alpha-secret" not in caplog.text
    assert answers[2]["total"] == 1 and answers[2]["data"][0]["slug"] == "alpha"
    assert answers[3]["config"] == "pc-guard" and answers[3]["headers"] == made["headers"]
    error_of(api(gateway, "POST", "/v1/agents", {"slug": "alpha", "url": agent.url}, key), 409, "slug")
    deleted = api(gateway, "DELETE", "/v1/agents/alpha", key=key)
    assert deleted.status == 200 and deleted.json() == {"id": "alpha", "object": "agent", "deleted": True}
    error_of(api(gateway, "GET", "/v1/agents/alpha", key=key), 404, "slug")


def test_a_0_3_card_gives_its_endpoint_as_url(gateway, agent):
    key = create_key(gateway)["key"]
    agent.answer(card_v03(f"{agent.url}/a2a/v1"))
    made = create(gateway, key, slug="legacy", url=agent.url + "/base/")
    assert (made["endpoint"], made["protocol_version"], made["name"]) == (f"{agent.url}/a2a/v1", "0.3.0",
                                                                          "Legacy agent")
    assert agent.requests[-1][0] == "/base/.well-known/agent-card.json"


def test_an_agent_built_with_the_official_sdk_is_registered_as_its_card_says(gateway):
    key = create_key(gateway)["key"]
    with start_a2a_agent("records") as sdk_agent:
        served = sdk_agent.card()
        made = create(gateway, key, slug="sdk", url=sdk_agent.base)
        assert made["card"] == served and made["name"] == served["name"]
        assert made["endpoint"] == sdk_agent.rpc_url
        assert made["protocol_version"] == served["supportedInterfaces"][0]["protocolVersion"]
        refreshed = api(gateway, "POST", "/v1/agents/sdk/refresh", key=key)
        assert refreshed.status == 200 and refreshed.json()["card"] == served, refreshed.text


def _skills_without_id(url: str) -> dict[str, Any]:
    card = card_v1(url)
    card["skills"] = [{"name": "Answer", "description": "x", "tags": []}]
    return card


def _no_url(url: str) -> dict[str, Any]:
    card = card_v03(url)
    del card["url"]
    return card


def _grpc_only(url: str) -> dict[str, Any]:
    card = card_v1(url)
    card["supportedInterfaces"][0]["protocolBinding"] = "GRPC"
    return card


@pytest.mark.parametrize(("make_body", "param", "words"), [
    (lambda url: b"<html>not a card</html>", "card", "not JSON"),
    (lambda url: [card_v1(url)], "card", "got an array"),
    (lambda url: card_v1(url, name=""), "card.name", "must not be empty"),
    (lambda url: {k: v for k, v in card_v1(url).items() if k != "name"}, "card.name", "name is required"),
    (_no_url, "card.url", "url is required"),
    (_skills_without_id, "card.skills[0].id", "skills[0].id is required"),
    (lambda url: card_v1(url, skills="all"), "card.skills", "list of objects"),
    (lambda url: card_v1(url, capabilities=None), "card.capabilities", "capabilities"),
    (lambda url: card_v1(url, defaultInputModes=[1]), "card.defaultInputModes[0]", "must be a string"),
    (_grpc_only, "card.supportedInterfaces", "JSON-RPC only"),
    (lambda url: card_v1("ftp://files.example.com/rpc"), "card.supportedInterfaces[0].url", "http"),
    (lambda url: card_v03(url, supportedInterfaces=[{"url": url}]), "card.supportedInterfaces[0].protocolBinding",
     "required"),
])
def test_a_card_that_fails_validation_is_refused_naming_the_field(gateway, agent, make_body, param, words):
    key = create_key(gateway)["key"]
    agent.answer(make_body(f"{agent.url}/rpc"))
    error = error_of(api(gateway, "POST", "/v1/agents", {"slug": "bad", "url": agent.url}, key), 400, param)
    assert words in error["message"], error
    error_of(api(gateway, "GET", "/v1/agents/bad", key=key), 404)


def test_a_card_over_1_mb_is_refused_and_read_no_further(gateway, agent):
    key = create_key(gateway)["key"]
    agent.answer(stream_bytes=256 << 20)  # 256 MiB offered
    error = error_of(api(gateway, "POST", "/v1/agents", {"slug": "big", "url": agent.url}, key), 413, "card")
    assert "1048576 bytes" in error["message"]
    assert agent.streamed < 64 << 20  # the gateway stopped reading and dropped the connection
    error_of(api(gateway, "GET", "/v1/agents/big", key=key), 404)
    agent.answer(b" " * (agent_cards.MAX_CARD_BYTES - 2) + b"{}")  # exactly the limit: read, then validated
    error_of(api(gateway, "POST", "/v1/agents", {"slug": "big", "url": agent.url}, key), 400, "card.name")


@pytest.mark.parametrize("url", ["http://169.254.169.254", "http://metadata.google.internal/agent",
                                 "http://10.1.2.3", "http://[fd00:ec2::254]"])
def test_blocked_addresses_are_refused_before_any_read(gateway, url):
    key = create_key(gateway)["key"]
    error = error_of(api(gateway, "POST", "/v1/agents", {"slug": "meta", "url": url}, key), 403, "url")
    assert "blocked" in error["message"]
    error_of(api(gateway, "GET", "/v1/agents/meta", key=key), 404)


def test_a_card_whose_endpoint_is_a_metadata_address_is_refused(gateway, agent):
    key = create_key(gateway)["key"]
    agent.answer(card_v1("http://169.254.169.254/latest/meta-data"))
    error_of(api(gateway, "POST", "/v1/agents", {"slug": "meta", "url": agent.url}, key), 403,
             "card.supportedInterfaces")
    agent.answer(card_v03("http://169.254.169.254/rpc"))
    error_of(api(gateway, "POST", "/v1/agents", {"slug": "meta", "url": agent.url}, key), 403, "card.url")


def test_a_redirect_is_refused_not_followed(gateway, agent):
    key = create_key(gateway)["key"]
    agent.answer(status=302, headers={"location": "http://169.254.169.254/latest/meta-data/"})
    error = error_of(api(gateway, "POST", "/v1/agents", {"slug": "moved", "url": agent.url}, key), 502, "url")
    assert "does not follow redirects" in error["message"] and "agent 'moved'" in error["message"]
    assert len(agent.requests) == 1  # one read, no second request anywhere
    error_of(api(gateway, "GET", "/v1/agents/moved", key=key), 404)


def test_upstream_failures_name_the_agent_with_the_credential_masked(gateway, agent, monkeypatch, caplog):
    key = create_key(gateway)["key"]
    agent.answer({"error": f"bad credential {TOKEN}"}, status=401)
    with caplog.at_level(logging.DEBUG):
        refused = api(gateway, "POST", "/v1/agents", {"slug": "nope", "url": agent.url,
                                                      "headers": {"Authorization": TOKEN}}, key)
    error = error_of(refused, 502, "url")
    assert "agent 'nope'" in error["message"] and "HTTP 401" in error["message"]
    assert "agent-alpha-secret" not in refused.text and "agent-alpha-secret" not in caplog.text
    agent.answer(card_v1(f"{agent.url}/rpc"), delay_s=2.0)
    monkeypatch.setattr(agent_cards, "FETCH_TIMEOUT_S", 0.3)
    error = error_of(api(gateway, "POST", "/v1/agents", {"slug": "slow", "url": agent.url}, key), 504, "url")
    assert "agent 'slow'" in error["message"]
    error = error_of(api(gateway, "POST", "/v1/agents", {"slug": "gone", "url": "http://127.0.0.1:9"}, key), 502)
    assert "agent 'gone'" in error["message"]


@pytest.mark.parametrize(("body", "param"), [
    ({"url": "http://127.0.0.1:1"}, "slug"),
    ({"slug": "bad slug", "url": "http://127.0.0.1:1"}, "slug"),
    ({"slug": "s"}, "url"),
    ({"slug": "s", "url": "stdio:agent"}, "url"),
    ({"slug": "s", "url": "http://127.0.0.1:1/?q=1"}, "url"),
    ({"slug": "s", "url": "http://127.0.0.1:1", "headers": {"Host": "x"}}, "headers.Host"),
    ({"slug": "s", "url": "http://127.0.0.1:1", "headers": {"X-A": "a\r\nb"}}, "headers.X-A"),
    ({"slug": "s", "url": "http://127.0.0.1:1", "config": "{not json"}, "config"),
    ({"slug": "s", "url": "http://127.0.0.1:1", "name": "x"}, "name"),
])
def test_bad_bodies_name_the_field_before_any_read(gateway, body, param):
    key = create_key(gateway)["key"]
    error = error_of(api(gateway, "POST", "/v1/agents", body, key), 400)
    assert error["param"] == param or param in error["message"], error


def test_put_rules(gateway, agent):
    key = create_key(gateway)["key"]
    made = create(gateway, key, slug="moving", url=agent.url, headers={"Authorization": TOKEN})
    reads = len(agent.requests)
    renamed = api(gateway, "PUT", "/v1/agents/moving", {"config": '{"input_guardrails": []}'}, key)
    assert renamed.status == 200 and len(agent.requests) == reads  # nothing that reaches the agent changed
    other = CardServer().start()
    try:
        other.answer(card_v1(f"{other.url}/rpc", name="Other agent"))
        error = error_of(api(gateway, "PUT", "/v1/agents/moving", {"url": other.url}, key), 400, "url")
        assert "headers" in error["message"]
        error_of(api(gateway, "PUT", "/v1/agents/moving", {"url": other.url, "headers": made["headers"]}, key),
                 400, "headers")
        same = api(gateway, "PUT", "/v1/agents/moving", {"headers": made["headers"]}, key)
        assert same.status == 200 and same.json()["headers"] == made["headers"], same.text
        assert agent.requests[-1][1]["authorization"] == TOKEN  # the masked value kept the stored one
        error_of(api(gateway, "PUT", "/v1/agents/moving", {"slug": "other"}, key), 400, "slug")
        error_of(api(gateway, "PUT", "/v1/agents/moving", {"url": None}, key), 400, "url")
        moved = api(gateway, "PUT", "/v1/agents/moving", {"url": other.url, "headers": None}, key)
        assert moved.status == 200, moved.text
        assert moved.json()["headers"] == {} and moved.json()["name"] == "Other agent"
        assert moved.json()["endpoint"] == f"{other.url}/rpc" and "authorization" not in other.requests[-1][1]
        other.answer(b"[]")  # a new url whose card fails: nothing changes
        back = api(gateway, "PUT", "/v1/agents/moving", {"url": other.url + "/v2"}, key)
        error_of(back, 400, "card")
        assert api(gateway, "GET", "/v1/agents/moving", key=key).json()["url"] == other.url
    finally:
        other.stop()


def test_refresh_reads_the_card_again_and_keeps_the_old_one_when_the_new_one_fails(gateway, agent):
    key = create_key(gateway)["key"]
    made = create(gateway, key, slug="fresh", url=agent.url, headers={"X-Agent-Key": "k-0123456789abcdef"})
    agent.answer(card_v1(f"{agent.url}/rpc", name="Renamed agent"))
    refreshed = api(gateway, "POST", "/v1/agents/fresh/refresh", key=key)
    assert refreshed.status == 200, refreshed.text
    assert refreshed.json()["name"] == "Renamed agent" and refreshed.json()["card"]["name"] == "Renamed agent"
    assert refreshed.json()["card_fetched_at"] > made["card_fetched_at"]
    agent.answer({"name": "No url"})
    error_of(api(gateway, "POST", "/v1/agents/fresh/refresh", key=key), 400, "card.url")
    kept = api(gateway, "GET", "/v1/agents/fresh", key=key).json()
    assert kept["name"] == "Renamed agent" and kept["card_fetched_at"] == refreshed.json()["card_fetched_at"]
    # the card moves its endpoint to another origin: the stored headers would follow it
    agent.answer(card_v1("https://elsewhere.example.com/rpc"))
    error = error_of(api(gateway, "POST", "/v1/agents/fresh/refresh", key=key), 409, "card.url")
    assert "headers" in error["message"]
    assert api(gateway, "GET", "/v1/agents/fresh", key=key).json()["endpoint"] == f"{agent.url}/rpc"
    error_of(api(gateway, "POST", "/v1/agents/fresh/refresh", {"extra": 1}, key), 400, "extra")
    error_of(api(gateway, "POST", "/v1/agents/ghost/refresh", key=key), 404, "slug")


def test_another_workspace_sees_nothing_and_scopes_are_enforced(gateway, agent):
    admin = create_key(gateway)
    create(gateway, admin["key"], slug="private", url=agent.url, headers={"Authorization": TOKEN})
    other = create_key(gateway)["key"]
    for method, path, body in (("GET", "/v1/agents/private", None), ("PUT", "/v1/agents/private", {"config": "x"}),
                               ("DELETE", "/v1/agents/private", None),
                               ("POST", "/v1/agents/private/refresh", None)):
        error_of(api(gateway, method, path, body, other), 404)
    assert api(gateway, "GET", "/v1/agents", key=other).json()["total"] == 0
    member = create_key(gateway, "member", admin["workspace_id"])
    for method, path in (("GET", "/v1/agents"), ("GET", "/v1/agents/private")):
        assert error_of(api(gateway, method, path, key=member["key"]), 403)["code"] == "missing_role"
    narrowed = create_key(gateway, "admin", admin["workspace_id"], scopes=["agents.read"])["key"]
    assert api(gateway, "GET", "/v1/agents/private", key=narrowed).status == 200
    for method, path, body in (("POST", "/v1/agents", {"slug": "x", "url": agent.url}),
                               ("PUT", "/v1/agents/private", {"config": "x"}),
                               ("DELETE", "/v1/agents/private", None),
                               ("POST", "/v1/agents/private/refresh", None)):
        assert "agents.write" in error_of(api(gateway, method, path, body, narrowed), 403)["message"]
    writer = create_key(gateway, "admin", admin["workspace_id"], scopes=["agents.write"])["key"]
    assert "agents.read" in error_of(api(gateway, "GET", "/v1/agents", key=writer), 403)["message"]


def test_the_app_mounts_every_route_of_the_module_it_imports_later():
    from gateway import app
    from gateway.api import agents_admin

    assert app._AGENT_ADMIN_ROUTES == agents_admin.ROUTES
