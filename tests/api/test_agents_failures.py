"""Agents that fail, and guardrails on agent calls (docs/agents.md, "Errors and bounds", "Guardrails"), through a
served gateway with the official A2A SDK's client.

A failing agent is registered with a card (``tests/support/agent_cards.py``) whose JSON-RPC endpoint is a raw server
that answers every request the same wrong way (``tests/support/mcp_servers.py``'s ``MisbehavingServer``: slow,
resetting, JSON that is not JSON-RPC, not JSON, 50 MB, an HTML error page) or a port nothing listens on. Each call
is answered with a JSON-RPC error naming the agent by its slug (never its address), its text bounded, which the SDK
raises, and the gateway serves the next call as before. The gateway waits at most ``TIMEOUT_MS`` for an answer's
head and reads at most ``MAX_ANSWER`` bytes of a JSON answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.client import A2AClientError
from a2a.utils.errors import InternalError

from tests.support.a2a_agent import A2ATestAgent, start_a2a_agent
from tests.support.a2a_gateway import Tenant, answer_text, connect, events, final_task, rpc, send_body
from tests.support.agent_cards import CardServer, card_v1
from tests.support.mcp_servers import MODES, start_misbehaving_server
from tests.support.servers import Server, free_port, start_gateway

TIMEOUT_MS = 2000
MAX_ANSWER = 4 << 20
#: a part of what the JSON-RPC error says for each way of misbehaving
SAYS = {
    "slow": "agent 'flaky' did not answer within 2 s",
    "reset": "agent 'flaky' could not be reached: ",
    "invalid": "agent 'flaky' answered with a body that is not a JSON-RPC response",
    "garbage": "agent 'flaky' answered with a body that is not a JSON-RPC response",
    "huge": "agent 'flaky' ",
    "html": "agent 'flaky' answered HTTP 502: <!DOCTYPE html>",
}
DENY_WORD = {"id": "no-secrets", "deny": True, "default.contains": {"words": ["forbidden"], "operator": "none"}}
DENY_LEAK = {"id": "no-leaks", "deny": True, "default.contains": {"words": ["leak"], "operator": "none"}}
GUARDRAIL_DENIED = -32010


@pytest.fixture(scope="module")
def gw() -> Iterator[Server]:
    server = start_gateway({"GATEWAY_AGENT_TIMEOUT_MS": str(TIMEOUT_MS),
                            "GATEWAY_MAX_UPSTREAM_BODY_BYTES": str(MAX_ANSWER)})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agent() -> Iterator[A2ATestAgent]:
    with start_a2a_agent("alpha") as running:
        yield running


@pytest.fixture(scope="module")
def cards() -> Iterator[CardServer]:
    server = CardServer().start()
    yield server
    server.stop()


def register_at(tenant: Tenant, cards: CardServer, slug: str, endpoint: str) -> None:
    """Register ``slug`` with a card whose JSON-RPC endpoint is ``endpoint``."""
    cards.answer(card_v1(endpoint, name=slug))
    tenant.register(slug, cards.url)


@pytest.mark.parametrize("mode", MODES)
async def test_an_agent_that_misbehaves_is_a_bounded_json_rpc_error_and_the_next_call_is_served(
        gw: Server, agent: A2ATestAgent, cards: CardServer, mode: str) -> None:
    tenant = Tenant(gw)
    tenant.register("alpha", agent.base)
    with start_misbehaving_server(mode) as bad:
        register_at(tenant, cards, "flaky", bad.url)
        answer = await rpc(gw, "flaky", send_body("hello", id="f1"), tenant.key)
        assert answer.status_code == 200, answer.text
        assert len(answer.content) < 4096
        error = answer.json()["error"]
        assert answer.json()["id"] == "f1" and error["code"] == -32603
        assert error["message"].startswith(SAYS[mode]), error
        assert str(bad.port) not in error["message"] and "127.0.0.1" not in error["message"]
        async with connect(gw, "flaky", tenant.key, streaming=False) as client:
            with pytest.raises(InternalError, match="agent 'flaky'"):  # the SDK's error for -32603
                await final_task(client, "again")
        async with connect(gw, "alpha", tenant.key, streaming=False) as client:
            assert answer_text(await final_task(client, "still here")) == "alpha: still here"
    [record] = [r for r in tenant.wait_logs(2, "agent:flaky") if r["metadata"]["a2a_method"] == "SendMessage"][:1]
    assert record["metadata"]["a2a_error_code"] == -32603 and "agent 'flaky'" in record["error"]


async def test_an_agent_that_is_down_is_a_json_rpc_error_naming_it(
        gw: Server, cards: CardServer) -> None:
    tenant = Tenant(gw)
    port = free_port()
    register_at(tenant, cards, "gone", f"http://127.0.0.1:{port}/a2a")
    answer = await rpc(gw, "gone", send_body("anyone?", id=7), tenant.key)
    assert answer.status_code == 200 and answer.json()["id"] == 7
    message = answer.json()["error"]["message"]
    assert message.startswith("agent 'gone' could not be reached") and str(port) not in message
    async with connect(gw, "gone", tenant.key) as client:  # a stream meets the same error
        with pytest.raises(InternalError, match="could not be reached"):
            await events(client, "anyone?")


# --- guardrails -----------------------------------------------------------------------------------------------------


async def test_the_requests_config_denies_before_and_after_the_agent_naming_the_guardrail(
        gw: Server, agent: A2ATestAgent) -> None:
    tenant = Tenant(gw)
    tenant.register("alpha", agent.base)
    config = json.dumps({"input_guardrails": [DENY_WORD], "output_guardrails": [DENY_LEAK]})
    agent.clear_received()
    fine = await rpc(gw, "alpha", send_body("hello", id="g1"), tenant.key, **{"x-gateway-config": config})
    assert fine.json()["result"]["task"]["artifacts"], fine.text
    before = await rpc(gw, "alpha", send_body("a forbidden word", id="g2"), tenant.key,
                       **{"x-gateway-config": config})
    # a message answer is one text part (a task's answer comes in pieces, each a text of its own)
    after = await rpc(gw, "alpha", send_body("message with a leak", id="g3"), tenant.key,
                      **{"x-gateway-config": config})
    for answer, name in ((before, "no-secrets"), (after, "no-leaks")):
        assert answer.status_code == 200
        error = answer.json()["error"]
        assert error["code"] == GUARDRAIL_DENIED and f"'{name}'" in error["message"], error
        assert error["data"]["guardrail"] == name and error["data"]["hook_results"]
    assert (before.json()["id"], after.json()["id"]) == ("g2", "g3")
    sent = [_text(r["body"]) for r in agent.received()]
    # the denied input never reached the agent; the output was judged after the agent answered
    assert sent == ["hello", "message with a leak"]


async def test_the_agents_own_config_applies_and_a_redaction_rewrites_what_it_receives(
        gw: Server, agent: A2ATestAgent) -> None:
    tenant = Tenant(gw)
    redact = {"input_guardrails": [{"id": "pii", "default.pii": {"redact": True}}, DENY_WORD]}
    tenant.register("alpha", agent.base, config=json.dumps(redact))
    agent.clear_received()
    async with connect(gw, "alpha", tenant.key, streaming=False) as client:
        answered = answer_text(await final_task(client, "mail jane.doe@example.com please"))
        with pytest.raises(A2AClientError, match="no-secrets"):
            await final_task(client, "forbidden")
    [sent] = [_text(r["body"]) for r in agent.received()]
    assert "jane.doe@example.com" not in sent and "jane.doe@example.com" not in answered
    bad = await rpc(gw, "alpha", send_body("hi", id="b1"), tenant.key,
                    **{"x-gateway-config": json.dumps({"input_guardrails": [{"id": "x", "default.nosuch": {}}]})})
    assert bad.json()["error"]["code"] == -32602 and "x-gateway-config" in bad.json()["error"]["message"]


def _text(body: Any) -> str:
    return "".join(part.get("text", "") for part in body["params"]["message"]["parts"])
