"""``GET /v1/logs/aggregates`` through the real gateway: the requests just made show in the window's totals,
series and per-provider/model groups; same key rules as ``/v1/logs``; a bad window is a 400 naming it."""

from __future__ import annotations

import tempfile
import time
import uuid

import pytest

from tests.support.http import post, request
from tests.support.keys import add_key
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def headers_for(base: str, key: str = ADMIN_KEY) -> dict[str, str]:
    return {"x-gateway-api-key": key, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
            "authorization": "Bearer sk-test", "content-type": "application/json",
            "x-gateway-trace-id": f"agg-{uuid.uuid4().hex}"}


def aggregates(server, query: str = "", key: str = ADMIN_KEY):
    return request("GET", f"{server.url}/v1/logs/aggregates{query}", headers={"x-gateway-api-key": key})


def wait_for(server, predicate, query: str = "?window=15m", key: str = ADMIN_KEY, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        resp = aggregates(server, query, key)
        assert resp.status == 200, resp.text
        body = resp.json()
        if predicate(body) or time.monotonic() > deadline:
            return body


@pytest.fixture(scope="module")
def fresh_gateway(mock_server):
    data_dir = tempfile.mkdtemp(prefix="gw-agg-")
    add_key(data_dir, "member-agg-a", "team-a")
    server = start_gateway(data_dir=data_dir)
    yield server
    server.stop()


def test_requests_show_in_totals_series_and_groups(fresh_gateway, mock):
    ok, failing = mock.scenario(), mock.scenario([{"status": 500}])
    for _ in range(4):
        assert post(f"{fresh_gateway.url}/v1/chat/completions", CHAT, headers_for(ok)).status == 200
    assert post(f"{fresh_gateway.url}/v1/chat/completions", {**CHAT, "model": "gpt-4o"},
                headers_for(failing)).status == 500
    body = wait_for(fresh_gateway, lambda b: b["totals"]["requests"] >= 5)
    totals = body["totals"]
    assert body["object"] == "logs.aggregates" and body["window"] == "15m" and body["slot_seconds"] == 10
    assert totals["requests"] == 5 and totals["errors"] == 1 and totals["by_status"] == {"200": 4, "500": 1}
    assert totals["error_rate"] == 0.2
    assert 0 < totals["latency_p50_ms"] <= totals["latency_p99_ms"]
    assert totals["added_p50_ms"] > 0 and totals["total_tokens"] > 0 and totals["cost_usd"] > 0
    assert totals["requests_per_second"] > 0
    series = body["series"]
    assert len(series["t"]) == 90 and sum(series["errors_5xx"]) == 1
    assert sum(series["tokens"]) == totals["total_tokens"]
    groups = {(g["provider"], g["model"]): g for g in body["groups"]}
    assert groups[("vendorA", "gpt-4o-mini")]["requests"] == 4
    assert groups[("vendorA", "gpt-4o")]["by_status"] == {"500": 1}
    narrowed = aggregates(fresh_gateway, "?window=15m&provider=vendorA&model=gpt-4o").json()
    assert narrowed["totals"]["requests"] == 1 and narrowed["totals"]["by_status"] == {"500": 1}
    assert [(g["provider"], g["model"]) for g in narrowed["groups"]] == [("vendorA", "gpt-4o")]
    assert narrowed["provider"] == "vendorA" and narrowed["model"] == "gpt-4o"
    for window, slots in (("1h", 60), ("1d", 96)):
        longer = aggregates(fresh_gateway, f"?window={window}").json()
        assert longer["totals"]["requests"] == 5 and len(longer["series"]["t"]) == slots


def test_key_rules_are_those_of_v1_logs(fresh_gateway, mock):
    base = mock.scenario()
    assert post(f"{fresh_gateway.url}/v1/chat/completions", CHAT, headers_for(base, "member-agg-a")).status == 200
    mine = wait_for(fresh_gateway, lambda b: b["totals"]["requests"] >= 1, key="member-agg-a")
    assert mine["totals"]["requests"] == 1  # only team-a's request, not the default workspace's
    everyone = aggregates(fresh_gateway, "?window=15m").json()["totals"]["requests"]
    assert everyone > 1
    assert aggregates(fresh_gateway, "?window=15m&workspace=team-a").json()["totals"]["requests"] == 1
    assert aggregates(fresh_gateway, "?workspace=default", key="member-agg-a").status == 403
    assert request("GET", f"{fresh_gateway.url}/v1/logs/aggregates").status == 401
    assert aggregates(fresh_gateway, key="nope").status == 401


@pytest.mark.parametrize("query, param", [
    ("?window=2h", "window"), ("?window=", "window"), ("?window=15M", "window"), ("?provider=", "provider"),
    ("?model=", "model"),
])
def test_a_bad_parameter_is_a_400_naming_it(gateway, query, param):
    resp = aggregates(gateway, query)
    assert resp.status == 400 and resp.json()["error"]["param"] == param


def test_the_default_window_is_the_last_hour(gateway):
    body = aggregates(gateway).json()
    assert body["window"] == "1h" and body["slot_seconds"] == 60
