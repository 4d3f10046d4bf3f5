"""A2A agents through the gateway end to end (issue 37, docs/agents.md): the official A2A SDK's client (a2a-sdk
1.3.0) discovers and calls an agent built with the same SDK (``tests/support/a2a_agent.py``) through a served
gateway (``gateway serve``), holding only a gateway key.

One gateway and one agent serve the module; each test makes its own workspace (an admin key of its own) and
registers the agent there with ``POST /v1/agents``, so no test sees another's agents, records or policies. The
helpers are in ``tests/support/a2a_gateway.py``; agents that fail and guardrails in ``test_agents_failures.py``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState

from tests.support.a2a_agent import A2ATestAgent, start_a2a_agent
from tests.support.a2a_gateway import (
    Tenant,
    answer_text,
    ask,
    connect,
    events,
    final_task,
    rpc,
    send_body,
    session,
    streamed_text,
)
from tests.support.controlplane import api
from tests.support.http import request
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for
from tests.support.servers import Server, start_gateway

CARD = "/.well-known/agent-card.json"


@pytest.fixture(scope="module")
def gw() -> Iterator[Server]:
    server = start_gateway()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agent() -> Iterator[A2ATestAgent]:
    with start_a2a_agent("alpha") as running:
        yield running


@pytest.fixture
def tenant(gw: Server) -> Tenant:
    return Tenant(gw)


def card_of(gw: Server, slug: str, key: str, **headers: str) -> httpx.Response:
    return httpx.get(f"{gw.url}/v1/agents/{slug}{CARD}", headers={"x-gateway-api-key": key, **headers}, timeout=30)


# --- the card -------------------------------------------------------------------------------------------------------


async def test_the_sdk_discovers_the_card_with_the_gateway_as_its_only_endpoint_and_credential(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    own = f"{gw.url}/v1/agents/alpha"
    async with httpx.AsyncClient(headers={"x-gateway-api-key": tenant.key}) as http:
        card = await A2ACardResolver(http, own).get_agent_card()
    assert card.name == "alpha" and [s.id for s in card.skills] == ["echo"]
    assert [(i.url, i.protocol_binding) for i in card.supported_interfaces] == [(own, "JSONRPC")]  # no REST one
    assert set(card.security_schemes) == {"gatewayKey", "gatewayBearer"}
    assert card.security_schemes["gatewayKey"].api_key_security_scheme.name == "x-gateway-api-key"
    assert card.security_schemes["gatewayBearer"].http_auth_security_scheme.scheme == "Bearer"
    served = card_of(gw, "alpha", tenant.key)
    assert served.status_code == 200 and served.headers["content-type"].startswith("application/json")
    assert agent.base not in served.text and "127.0.0.1:%d" % agent.port not in served.text
    assert "x-agent-key" not in served.text and "agentKey" not in served.text


def test_the_cards_url_follows_the_proxy_in_front(gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    behind = card_of(gw, "alpha", tenant.key, **{"x-forwarded-proto": "https", "x-forwarded-host": "ai.example.com"})
    assert behind.status_code == 200
    assert [i["url"] for i in behind.json()["supportedInterfaces"]] == ["https://ai.example.com/v1/agents/alpha"]


def test_the_cards_url_is_the_public_url_when_one_is_set(agent: A2ATestAgent) -> None:
    """GATEWAY_PUBLIC_URL names the gateway's address in every card, whatever Host or X-Forwarded-* reached it."""
    public = start_in_process({"GATEWAY_PUBLIC_URL": "https://gw.example.com/ai/"})
    try:
        tenant = Tenant(public)
        tenant.register("alpha", agent.base)
        served = request("GET", f"{public.url}/v1/agents/alpha{CARD}",
                         headers={"x-gateway-api-key": tenant.key, "x-forwarded-host": "evil.example.net"})
        assert served.status == 200, served.text
        assert [i["url"] for i in served.json()["supportedInterfaces"]] == ["https://gw.example.com/ai/v1/agents/alpha"]
    finally:
        public.stop()


# --- calls ----------------------------------------------------------------------------------------------------------


async def test_a_message_is_answered_and_a_stream_arrives_in_order(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    async with connect(gw, "alpha", tenant.key, streaming=False) as client:
        task = await final_task(client, "hello there")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED and answer_text(task) == "alpha: hello there"
        [reply] = await events(client, "message for you")
        assert reply.message.parts[0].text == "alpha: message for you"
    async with connect(gw, "alpha", tenant.key) as client:
        streamed = await events(client, "stream me")
    kinds = [event.WhichOneof("payload") for event in streamed]
    assert kinds == ["task", "status_update"] + ["status_update", "artifact_update"] * 3 + ["status_update"]
    steps = [e.status_update.status.message.parts[0].text for e in streamed
             if e.HasField("status_update") and e.status_update.status.message.parts]
    assert steps == ["step 1", "step 2", "step 3"]
    assert streamed_text(streamed) == "alpha: stream me"
    assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_task_is_fetched_and_cancelled_with_the_key_the_cards_scheme_asks_for(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    async with connect(gw, "alpha", tenant.key, streaming=False, interceptor=True) as client:
        [started] = [e async for e in client.send_message(ask("wait for me", return_immediately=True),
                                                          context=session())]
        task_id = started.task.id
        fetched = await client.get_task(GetTaskRequest(id=task_id), context=session())
        assert fetched.id == task_id and fetched.status.state in (TaskState.TASK_STATE_SUBMITTED,
                                                                  TaskState.TASK_STATE_WORKING)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id), context=session())
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert (await client.get_task(GetTaskRequest(id=task_id), context=session())).status.state \
            == TaskState.TASK_STATE_CANCELED
        with pytest.raises(A2AClientError):  # without its session the interceptor sends no key: 401
            await client.get_task(GetTaskRequest(id=task_id))


async def test_the_0_3_methods_are_relayed_with_their_own_version(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    sent = await rpc(gw, "alpha", send_body("message in 0.3", method="message/send"), tenant.key,
                     **{"a2a-version": "0.3"})
    assert sent.status_code == 200, sent.text
    assert sent.json()["id"] == "r1"
    result = sent.json()["result"]
    assert result["kind"] == "message" and result["parts"][0]["text"] == "alpha: message in 0.3"
    missing = await rpc(gw, "alpha", {"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": {"id": "nope"}},
                        tenant.key, **{"a2a-version": "0.3"})
    assert missing.status_code == 200 and missing.json()["id"] == 9
    assert missing.json()["error"]["code"] == -32001  # the agent's own "task not found", relayed
    methods = [r["body"]["method"] for r in agent.received()[-2:]]
    assert methods == ["message/send", "tasks/get"]


async def test_a_malformed_request_is_answered_with_its_id_and_never_sent(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    agent.clear_received()
    cases = [(b"{not json", -32700, None), ({"jsonrpc": "1.0", "id": 3, "method": "GetTask"}, -32600, 3),
             ({"jsonrpc": "2.0", "id": 4}, -32600, 4), ({"jsonrpc": "2.0", "method": "GetTask"}, -32600, None),
             ({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": [1]}, -32602, 5),
             ([{"jsonrpc": "2.0", "id": 6, "method": "GetTask"}], -32600, None)]
    for body, code, id in cases:
        answer = await rpc(gw, "alpha", body, tenant.key)
        assert answer.status_code == 200, answer.text
        assert answer.json()["error"]["code"] == code and answer.json()["id"] == id, answer.text
    assert agent.received() == []


async def test_a_client_that_leaves_a_stream_ends_the_call_and_its_record_says_so(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    body = send_body("wait for nobody", id="s1", method="SendStreamingMessage")
    headers = {"x-gateway-api-key": tenant.key, "a2a-version": "1.0", "accept": "text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", f"{gw.url}/v1/agents/alpha", json=body, headers=headers) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            async for line in streamed.aiter_lines():
                if line.startswith("data:"):
                    assert '"task"' in line  # the task as it started; the agent then waits for a cancel
                    break
    [record] = tenant.wait_logs(1, "agent:alpha")
    assert (record["endpoint"], record["status"], record["stream"]) == ("a2a.SendStreamingMessage", 499, True)
    assert record["error"] == "client disconnected" and record["metadata"]["a2a_task_id"]


# --- who may call ---------------------------------------------------------------------------------------------------


async def test_a_key_without_agents_invoke_is_refused_and_a_missing_key_is_challenged(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    missing = await rpc(gw, "alpha", send_body("hi", id="k1"))
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["id"] == "k1" and missing.json()["error"]["code"] == -32600
    scopeless = tenant.member_key(scopes=["inference"])["key"]
    forbidden = await rpc(gw, "alpha", send_body("hi", id="k2"), scopeless)
    assert forbidden.status_code == 403 and forbidden.json()["id"] == "k2"
    assert "agents.invoke" in forbidden.json()["error"]["message"]
    assert card_of(gw, "alpha", scopeless).status_code == 403
    async with httpx.AsyncClient(headers={"x-gateway-api-key": scopeless}) as http:
        with pytest.raises(Exception):  # noqa: B017 - the SDK's resolver raises its own error on the 403
            await A2ACardResolver(http, f"{gw.url}/v1/agents/alpha").get_agent_card()
    member = tenant.member_key(scopes=["agents.invoke"])["key"]  # a member key holds it when given it
    async with connect(gw, "alpha", member, streaming=False) as client:
        assert answer_text(await final_task(client, "member")) == "alpha: member"


async def test_a_key_of_another_workspace_gets_the_404_of_an_unknown_agent(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    stranger = Tenant(gw)
    for key, slug in ((stranger.key, "alpha"), (tenant.key, "nobody")):
        hidden = await rpc(gw, slug, send_body("hi", id="w1"), key)
        assert hidden.status_code == 404 and hidden.json()["id"] == "w1"
        assert f"no agent '{slug}'" in hidden.json()["error"]["message"]
        assert card_of(gw, slug, key).status_code == 404
    elsewhere = card_of(gw, "alpha", tenant.key)
    assert elsewhere.status_code == 200
    async with httpx.AsyncClient(headers={"x-gateway-api-key": tenant.key}) as http:
        named = await http.get(f"{gw.url}/v1/agents/alpha{CARD}?workspace_id={stranger.workspace}")
    assert named.status_code == 404


async def test_the_agents_sealed_header_reaches_it_and_nothing_shows_it(gw: Server, tenant: Tenant) -> None:
    secret = f"agent-sekrit-{uuid.uuid4().hex}"
    with start_a2a_agent("locked", require_header=("x-agent-key", secret)) as locked:
        made = tenant.register("locked", locked.base, headers={"x-agent-key": secret})
        async with connect(gw, "locked", tenant.key) as client:
            assert streamed_text(await events(client, "knock knock")) == "locked: knock knock"
        received = locked.received()
        assert received and all(r["headers"].get("x-agent-key") == secret for r in received)
        assert all(tenant.key not in str(r["headers"]) for r in received)  # the gateway key stays at the gateway
        assert all(r["headers"].get("a2a-version") == "1.0" for r in received)
        answers = [card_of(gw, "locked", tenant.key).text, str(made), tenant.admin("GET", "/v1/agents/locked").text]
        records = tenant.wait_logs(1, "agent:locked")
        for text in [*answers, str(records)]:
            assert secret not in text
        assert secret not in gw.output()


# --- counted and limited --------------------------------------------------------------------------------------------


async def test_every_call_is_a_request_record_the_logs_filter_by_agent(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    async with connect(gw, "alpha", tenant.key, streaming=False) as client:
        task = await final_task(client, "count me")
        await client.get_task(GetTaskRequest(id=task.id))
    async with connect(gw, "alpha", tenant.key) as client:
        await events(client, "and me")
    records = tenant.wait_logs(3, "agent:alpha")
    by_endpoint = {r["endpoint"]: r for r in records}
    assert set(by_endpoint) == {"a2a.SendMessage", "a2a.GetTask", "a2a.SendStreamingMessage"}
    for record in records:
        assert (record["workspace"], record["provider"], record["model"], record["status"]) == (
            tenant.workspace, "agent:alpha", "alpha", 200)
        meta = record["metadata"]
        assert meta["agent"] == "alpha" and meta["a2a_bytes_in"] > 0 and meta["a2a_bytes_out"] > 0
        assert "a2a_error_code" not in meta and 0 < record["upstream_latency_ms"] <= record["latency_ms"]
    assert by_endpoint["a2a.SendMessage"]["metadata"]["a2a_task_id"] == task.id
    assert by_endpoint["a2a.GetTask"]["metadata"]["a2a_task_id"] == task.id
    assert by_endpoint["a2a.SendStreamingMessage"]["stream"] is True
    assert by_endpoint["a2a.SendStreamingMessage"]["metadata"]["a2a_task_id"]
    other = tenant.admin("GET", "/v1/logs?provider=agent:nobody")
    assert other.status == 200 and other.json()["data"] == []
    grouped = tenant.admin("GET", "/v1/logs/aggregates?window=15m&provider=agent:alpha")
    assert grouped.status == 200, grouped.text
    assert [(g["provider"], g["model"], g["requests"]) for g in grouped.json()["groups"]] == [
        ("agent:alpha", "alpha", 3)]
    wanted = ('gateway_requests_total{cache_status="DISABLED",endpoint="a2a.GetTask",model="alpha",'
              'provider="agent:alpha",status="200"}')
    wait_for(lambda: wanted in api(gw, "GET", "/metrics").text, 8.0, 0.2)


async def test_a_rate_limit_on_the_agent_refuses_its_third_call(
        gw: Server, agent: A2ATestAgent, tenant: Tenant) -> None:
    tenant.register("alpha", agent.base)
    created = tenant.admin("POST", "/v1/policies/rate-limits", {
        "name": "two agent calls a minute", "conditions": [{"key": "provider", "value": "agent:alpha"}],
        "group_by": [{"key": "provider"}], "type": "requests", "unit": "rpm", "value": 2})
    assert created.status == 200, created.text
    left_in_minute = 60 - time.time() % 60
    if left_in_minute < 5:  # the windows are clock minutes: the three calls go in one
        await asyncio.sleep(left_in_minute + 0.1)
    agent.clear_received()
    async with connect(gw, "alpha", tenant.key, streaming=False) as client:
        for n in range(2):
            assert answer_text(await final_task(client, f"call {n}")) == f"alpha: call {n}"
        with pytest.raises(A2AClientError, match="429"):
            await final_task(client, "call 2")
    refused = await rpc(gw, "alpha", send_body("raw", id="rl"), tenant.key)
    assert refused.status_code == 429 and refused.json()["id"] == "rl"
    assert "two agent calls a minute" in refused.json()["error"]["message"]
    assert len(agent.received()) == 2
    records = tenant.wait_logs(4, "agent:alpha")
    assert sorted(r["status"] for r in records) == [200, 200, 429, 429]
