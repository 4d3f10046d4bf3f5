"""A session's usage settled response by response (``gateway/realtime/budget.py``, ``gateway/policies/parts.py``),
through a served gateway whose state store is a real Redis of this module's own: the policy's usage (read through
its API) moves after each response while the session is open, the end settles only the rest, an alert fires on a
part, a part the store cannot take is settled later exactly once, and the sessions' metrics carry their ``api``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import websockets

from tests.realtime.test_realtime_e2e import trace, vendor_config, ws_url
from tests.support.controlplane import api
from tests.support.policies import USAGE, get, tag, usage_limit
from tests.support.poll import await_for, wait_logs
from tests.support.redis_servers import RedisProcess
from tests.support.servers import ADMIN_KEY, Server, start_gateway
from tests.support.socket_events import raw_turn, raw_until

#: the session's one token's worth (its cost: one input token, rounded up to a micro-dollar) held while it is open
RESERVED = 1
PRICED_MODEL = "gpt-4o-mini"
_TABLE = Path(__file__).parents[2] / "gateway" / "observability" / "prices.json"


@pytest.fixture(scope="module")
def store() -> Iterator[RedisProcess]:
    server = RedisProcess().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rgw(store: RedisProcess, mock_server) -> Iterator[Server]:
    """A gateway on this module's Redis (its state store: policies' counters, reservations, alerts)."""
    server = start_gateway({"GATEWAY_REDIS_URL": store.url, "GATEWAY_STATE_TIMEOUT_MS": "3000"})
    yield server
    server.stop()


def headers(base: str, run: str, trace_id: str) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base), "x-gateway-trace-id": trace_id,
            "x-gateway-metadata": json.dumps({"run": run})}


def current(gw: Server, policy: str) -> float:
    return get(gw, USAGE, policy)["current_usage"]


async def respond(ws) -> dict:
    """One Realtime ``response.create`` and the usage of its ``response.done``."""
    await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
    return (await raw_until(ws, "response.done"))[-1]["response"]["usage"]


def cost_micros(usage: dict) -> int:
    """What the price table charges for a response of the priced model, in micro-dollars (rounded up)."""
    per_in, per_out = json.loads(_TABLE.read_text())["providers"]["vendorA"][PRICED_MODEL]
    return math.ceil(usage["input_tokens"] * per_in + usage["output_tokens"] * per_out - 1e-9)


def metric(gw: Server, name: str, **labels: str) -> float:
    want = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in api(gw, "GET", "/metrics").text.splitlines():
        if line.startswith(name + "{") and all(w in line for w in want):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_each_response_moves_the_token_budget_as_it_ends_and_the_end_settles_only_the_rest(rgw, mock):
    run, trace_id = tag(), trace()
    budget = usage_limit(rgw, run, "tokens", 1_000_000, alert_threshold=RESERVED + 1)
    used: list[int] = []
    url = f"{ws_url(rgw.url)}/v1/realtime?model=m"
    async with websockets.connect(url, additional_headers=headers(mock.scenario(), run, trace_id)) as ws:
        await ws.recv()
        for _ in range(3):
            used.append((await respond(ws))["total_tokens"])
            want = RESERVED + sum(used)  # every response so far, and the session's one reserved token
            await await_for(lambda want=want: current(rgw, budget) == want, 10, 0.05)
        # the alert threshold was crossed by a response, and reported while the session is still open
        alerts = (await await_for(lambda: get(rgw, USAGE, budget)["alerts"], 10, 0.05))
        assert len(alerts) == 1 and alerts[0]["usage"] >= RESERVED + 1
    [item] = wait_logs(rgw, trace_id)
    assert item["total_tokens"] == sum(used) and item["metadata"]["realtime_responses"] == 3
    await await_for(lambda: current(rgw, budget) == sum(used), 10, 0.05)  # the reserved token returned, once
    assert current(rgw, budget) == sum(used)


async def test_a_cost_budget_moves_by_each_responses_price(rgw, mock):
    run, trace_id = tag(), trace()
    budget = usage_limit(rgw, run, "cost", 100.0)
    spent: list[int] = []
    url = f"{ws_url(rgw.url)}/v1/realtime?model={PRICED_MODEL}"
    async with websockets.connect(url, additional_headers=headers(mock.scenario(), run, trace_id)) as ws:
        await ws.recv()
        for _ in range(3):
            spent.append(cost_micros(await respond(ws)))
            want = (RESERVED + sum(spent)) / 1_000_000
            await await_for(lambda want=want: current(rgw, budget) == pytest.approx(want, abs=1e-9), 10, 0.05)
    assert all(spent)
    wait_logs(rgw, trace_id)
    await await_for(lambda: current(rgw, budget) == pytest.approx(sum(spent) / 1_000_000, abs=1e-9), 10, 0.05)


async def test_a_part_the_store_does_not_take_is_settled_later_and_once(rgw, store, mock):
    run, trace_id = tag(), trace()
    budget = usage_limit(rgw, run, "tokens", 1_000_000)
    used: list[int] = []
    direct = redis.Redis.from_url(store.url)
    url = f"{ws_url(rgw.url)}/v1/realtime?model=m"
    async with websockets.connect(url, additional_headers=headers(mock.scenario(), run, trace_id)) as ws:
        await ws.recv()
        used.append((await respond(ws))["total_tokens"])
        await await_for(lambda: current(rgw, budget) == RESERVED + used[0], 10, 0.05)
        failed = metric(rgw, "gateway_state_store_errors_total", operation="settle")
        direct.config_set("maxmemory", "1")  # every write refused (noeviction): the store answers an error
        try:
            used.append((await respond(ws))["total_tokens"])  # the session goes on
            await await_for(lambda: metric(rgw, "gateway_state_store_errors_total", operation="settle") > failed,
                            10, 0.1)
        finally:
            direct.config_set("maxmemory", "0")
        used.append((await respond(ws))["total_tokens"])  # the pending part first, then this one
        await await_for(lambda: current(rgw, budget) == RESERVED + sum(used), 10, 0.05)
    wait_logs(rgw, trace_id)
    await await_for(lambda: current(rgw, budget) == sum(used), 10, 0.05)
    assert current(rgw, budget) == sum(used)


async def test_responses_mode_turns_settle_as_they_complete_and_metrics_name_each_api(rgw, mock):
    run, trace_id = tag(), trace()
    budget = usage_limit(rgw, run, "tokens", 1_000_000)
    used: list[int] = []
    async with websockets.connect(f"{ws_url(rgw.url)}/v1/responses",
                                  additional_headers=headers(mock.scenario(), run, trace_id)) as ws:
        for text in ("hello", "and again", "once more"):
            events = await raw_turn(ws, {"type": "response.create", "model": "m", "input": text, "store": False})
            used.append(events[-1]["response"]["usage"]["total_tokens"])
            want = RESERVED + sum(used)
            await await_for(lambda want=want: current(rgw, budget) == want, 10, 0.05)
    async with websockets.connect(f"{ws_url(rgw.url)}/v1/realtime?model=m",
                                  additional_headers=headers(mock.scenario(), tag(), trace())) as ws:
        await ws.recv()
    [item] = wait_logs(rgw, trace_id)
    assert item["endpoint"] == "responses.websocket" and item["total_tokens"] == sum(used)
    await await_for(lambda: current(rgw, budget) == sum(used), 10, 0.05)
    for name in ("responses", "realtime"):
        await await_for(lambda name=name: metric(rgw, "gateway_realtime_sessions_total", event="ended", api=name,
                                                 provider="vendorA") >= 1, 10, 0.2)
        assert metric(rgw, "gateway_realtime_messages_total", direction="out", api=name) >= 1
    assert metric(rgw, "gateway_realtime_bytes_total", api="responses") > 0


async def test_a_spent_cost_budget_ends_the_session_and_refuses_the_next(rgw, mock):
    run, trace_id = tag(), trace()
    usage_limit(rgw, run, "cost", 0.00001)  # ten micro-dollars: one response of the priced model spends it
    url = f"{ws_url(rgw.url)}/v1/realtime?model={PRICED_MODEL}"
    async with websockets.connect(url, additional_headers=headers(mock.scenario(), run, trace_id)) as ws:
        await ws.recv()
        assert cost_micros(await respond(ws)) >= 10
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["error"]["code"] == "usage_limit_exceeded"
        assert "USD used" in error["error"]["message"]
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd.code == 1008
    with pytest.raises(websockets.InvalidStatus) as refused:  # the session's cost estimate is priced: 429
        async with websockets.connect(url, additional_headers=headers(mock.scenario(), run, trace())):
            pass
    assert refused.value.response.status_code == 429
