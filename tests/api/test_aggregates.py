"""``GET /v1/logs/aggregates`` through the gateway's app (in process, its own embedded store): the requests just
made show in the window's totals, series and per-provider/model groups; same key rules as ``/v1/logs``; a bad
window is a 400 naming it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.support.asgi import call, in_process
from tests.support.headers import headers_for
from tests.support.keys import add_key
from tests.support.poll import await_for
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def agg_headers(base: str, key: str = ADMIN_KEY) -> dict[str, str]:
    return headers_for(base + "/v1", key=key, trace_id=f"agg-{uuid.uuid4().hex}")


async def chat(app, body: dict, headers: dict[str, str]) -> int:
    return (await call(app, "POST", "/v1/chat/completions", body, headers)).status


async def aggregates(app, query: str = "", key: str = ADMIN_KEY):
    return await call(app, "GET", f"/v1/logs/aggregates{query}", headers={"x-gateway-api-key": key})


async def wait_for(app, predicate, query: str = "?window=15m", key: str = ADMIN_KEY) -> dict:
    async def body() -> dict | None:
        resp = await aggregates(app, query, key)
        assert resp.status == 200, resp.text
        return resp.json() if predicate(resp.json()) else None

    return await await_for(body, 5.0, 0.05)


@pytest.fixture
async def app(tmp_path):
    """A gateway of its own (its aggregates hold only this test's requests), with a team-a member key."""
    await asyncio.to_thread(add_key, str(tmp_path), "member-agg-a", "team-a")
    async with in_process(data_dir=str(tmp_path)) as started:
        yield started


async def test_requests_show_in_totals_series_and_groups(app, mock):
    ok, failing = mock.scenario(), mock.scenario([{"status": 500}])
    for _ in range(4):
        assert await chat(app, CHAT, agg_headers(ok)) == 200
    assert await chat(app, {**CHAT, "model": "gpt-4o"}, agg_headers(failing)) == 500
    body = await wait_for(app, lambda b: b["totals"]["requests"] >= 5)
    totals = body["totals"]
    assert body["object"] == "logs.aggregates" and body["window"] == "15m" and body["slot_seconds"] == 10
    assert body["provider"] is None and body["model"] is None  # not narrowed (not the last group's names)
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
    narrowed = (await aggregates(app, "?window=15m&provider=vendorA&model=gpt-4o")).json()
    assert narrowed["totals"]["requests"] == 1 and narrowed["totals"]["by_status"] == {"500": 1}
    assert [(g["provider"], g["model"]) for g in narrowed["groups"]] == [("vendorA", "gpt-4o")]
    assert narrowed["provider"] == "vendorA" and narrowed["model"] == "gpt-4o"
    for window, slots in (("1h", 60), ("1d", 96)):
        longer = (await aggregates(app, f"?window={window}")).json()
        assert longer["totals"]["requests"] == 5 and len(longer["series"]["t"]) == slots


async def test_key_rules_are_those_of_v1_logs(app, mock):
    base = mock.scenario()
    assert await chat(app, CHAT, agg_headers(base)) == 200  # the default workspace's
    assert await chat(app, CHAT, agg_headers(base, "member-agg-a")) == 200
    await wait_for(app, lambda b: b["totals"]["requests"] >= 2)
    mine = await wait_for(app, lambda b: b["totals"]["requests"] >= 1, key="member-agg-a")
    assert mine["totals"]["requests"] == 1  # only team-a's request, not the default workspace's
    everyone = (await aggregates(app, "?window=15m")).json()["totals"]["requests"]
    assert everyone > 1
    assert (await aggregates(app, "?window=15m&workspace=team-a")).json()["totals"]["requests"] == 1
    assert (await aggregates(app, "?workspace=default", key="member-agg-a")).status == 403
    assert (await call(app, "GET", "/v1/logs/aggregates")).status == 401
    assert (await aggregates(app, key="nope")).status == 401


@pytest.mark.parametrize("query, param", [
    ("?window=2h", "window"), ("?window=", "window"), ("?window=15M", "window"), ("?provider=", "provider"),
    ("?model=", "model"), ("?windw=15m", "windw"), ("?status=500", "status"), ("?provider=not-a-provider", "provider"),
])
async def test_a_bad_parameter_is_a_400_naming_it(app, query, param):
    resp = await aggregates(app, query)
    assert resp.status == 400 and resp.json()["error"]["param"] == param


async def test_the_default_window_is_the_last_hour(app):
    body = (await aggregates(app)).json()
    assert body["window"] == "1h" and body["slot_seconds"] == 60
