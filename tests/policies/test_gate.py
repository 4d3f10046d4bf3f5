"""Policies enforced through the real gateway: exact admission, 429s that name the policy, buckets, conditions,
settlement to real usage (streams included), cost from the price table, alerts, archiving and the metric."""

from __future__ import annotations

import asyncio
import time

import msgspec
import openai
import pytest

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.controlplane.policies import Condition, GroupBy, RateLimitPolicy
from gateway.http.context import build_context
from gateway.http.errors import RateLimited
from gateway.observability.cost import Prices
from gateway.policies.gate import PolicyGate
from gateway.routing.plan import Planner
from gateway.schema.chat import parse_chat
from gateway.schema.config import Config
from gateway.settings import Settings
from gateway.state.memory import MemoryStateStore
from gateway_mock.kit import count_tokens
from tests.observability.test_metrics import wait_metric
from tests.support.http import request, stream_events
from tests.support.policies import (
    ADMIN,
    RATE,
    USAGE,
    chat,
    chat_headers,
    concurrently,
    create,
    get,
    rate_limit,
    same_day,
    statuses,
    tag,
    usage_limit,
)
from tests.support.poll import wait_for


def test_a_rate_limit_admits_exactly_n_concurrent_requests(gateway, mock):
    base = mock.scenario()

    def run():
        run_tag = tag()
        policy_id = rate_limit(gateway, run_tag, 5)
        return policy_id, concurrently([gateway.url], chat_headers(base, run_tag), 16)

    policy_id, responses = same_day(run)
    assert statuses(responses) == {200: 5, 429: 11}
    refused = next(r for r in responses if r.status == 429)
    error = refused.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"
    assert policy_id in error["message"] and "at most 5 requests per day" in error["message"]
    day_left = 86400 - int(time.time()) % 86400
    assert 0 < int(refused.headers["retry-after"]) <= day_left + 1
    wait_metric(gateway, "gateway_policy_rejections_total", 11, kind="rate_limit", policy=policy_id)


def test_retry_after_says_when_a_minute_window_admits_again(gateway, mock):
    run_tag = tag()
    rate_limit(gateway, run_tag, 1, unit="rpm")
    headers = chat_headers(mock.scenario(), run_tag)
    refused = None
    for _ in range(3):  # a minute boundary between two requests admits the second: try again
        answers = [chat(gateway.url, headers) for _ in range(2)]
        refused = next((r for r in answers if r.status == 429), None)
        if refused is not None:
            break
    assert refused is not None
    assert 1 <= int(refused.headers["retry-after"]) <= 60


def test_group_by_keeps_a_counter_per_value(gateway, mock):
    base = mock.scenario()
    run_tag = tag()
    policy_id = create(gateway, RATE, {"name": "per user", "conditions": [{"key": "metadata.run", "value": run_tag}],
                                       "group_by": [{"key": "metadata._user"}], "type": "requests", "unit": "rpd",
                                       "value": 2})
    alice, bob = chat_headers(base, run_tag, _user="alice"), chat_headers(base, run_tag, _user="bob")

    def run():
        return [chat(gateway.url, alice).status for _ in range(3)] + [chat(gateway.url, bob).status]

    assert same_day(run) == [200, 200, 429, 200]
    usage = wait_for(lambda: (m := get(gateway, RATE, policy_id)["value_key_usage_map"]) and len(m) == 2 and m)
    assert usage == {"alice": 2, "bob": 1}


def test_conditions_choose_the_requests_a_policy_limits(gateway, mock):
    base = mock.scenario()
    run_tag = tag()
    for condition in ({"key": "model", "value": "gpt-4o"}, {"key": "provider", "value": "anthropic"},
                      {"key": "model", "value": "*", "excludes": ["gpt-4o-mini", "other"]}):
        create(gateway, RATE, {"conditions": [{"key": "metadata.run", "value": run_tag}, condition],
                               "group_by": [{"key": "workspace_id"}], "type": "requests", "unit": "rpd", "value": 0})
    headers = chat_headers(base, run_tag)
    assert chat(gateway.url, headers, model="gpt-4o-mini").status == 200
    assert chat(gateway.url, headers, model="other").status == 200
    refused = chat(gateway.url, headers, model="gpt-4o")
    assert refused.status == 429


def test_a_cumulative_request_budget_refuses_with_the_usage_code(gateway, mock):
    run_tag = tag()
    policy_id = usage_limit(gateway, run_tag, "requests", 3)
    headers = chat_headers(mock.scenario(), run_tag)
    answers = concurrently([gateway.url], headers, 8)
    assert statuses(answers) == {200: 3, 429: 5}
    error = next(r for r in answers if r.status == 429)
    assert error.json()["error"]["code"] == "usage_limit_exceeded"
    assert error.json()["error"]["type"] == "insufficient_quota"
    assert policy_id in error.json()["error"]["message"]
    assert "retry-after" not in error.headers  # cumulative: no reset to wait for
    assert get(gateway, USAGE, policy_id)["current_usage"] == 3


def test_a_periodic_budget_says_when_it_resets(gateway, mock):
    run_tag = tag()
    policy_id = usage_limit(gateway, run_tag, "requests", 0, periodic_reset="weekly")
    refused = chat(gateway.url, chat_headers(mock.scenario(), run_tag))
    assert refused.status == 429
    reset = get(gateway, USAGE, policy_id)["next_usage_reset_at"]
    assert reset in refused.json()["error"]["message"]
    assert int(refused.headers["retry-after"]) <= 7 * 86400


def test_a_spent_budget_tells_the_openai_sdk_not_to_retry_while_a_rate_limit_keeps_retry_after(gateway, mock):
    """The openai SDK (max_retries=2) would wait a budget's Retry-After and retry for nothing: the budget's 429 says
    ``x-should-retry: false``, so the SDK raises at once after one request; a rate limit's 429 does not say it."""
    run_tag = tag()
    usage_limit(gateway, run_tag, "requests", 1, periodic_reset="weekly")
    base = mock.scenario()
    headers = chat_headers(base, run_tag)
    sent: list[str] = []
    counted = gateway.http_client(event_hooks={"request": [lambda r: sent.append(str(r.url))]})
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-test", max_retries=2, timeout=30,
                           default_headers={k: v for k, v in headers.items() if k != "authorization"},
                           http_client=counted)
    messages = [{"role": "user", "content": "hi"}]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # spends the budget
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert len(sent) == 2, sent  # one request each: the refused one was not retried
    assert time.monotonic() - started < 20  # not the Retry-After of days (the SDK would back off instead)
    refused = caught.value.response
    assert refused.headers["x-should-retry"] == "false" and int(refused.headers["retry-after"]) > 0
    assert caught.value.code == "usage_limit_exceeded"
    assert mock.calls(base)["calls"] == 1

    rate_tag = tag()
    rate_limit(gateway, rate_tag, 1)
    rate_headers = chat_headers(mock.scenario(), rate_tag)
    answers = [chat(gateway.url, rate_headers) for _ in range(3)]  # a midnight between them admits one more
    limited = next(r for r in answers if r.status == 429)
    assert int(limited.headers["retry-after"]) > 0
    assert "x-should-retry" not in limited.headers


def settled_usage(gateway, policy_id: str, expected: float) -> dict:
    return wait_for(lambda: (doc := get(gateway, USAGE, policy_id))["current_usage"] == expected and doc)


def test_token_budgets_settle_to_the_real_usage_streams_included(gateway, mock):
    run_tag = tag()
    policy_id = usage_limit(gateway, run_tag, "tokens", 100_000)
    base = mock.scenario([{"reply": "one two three four five six seven eight"}])
    headers = chat_headers(base, run_tag)
    used = 0
    for _ in range(2):
        resp = chat(gateway.url, headers, max_tokens=500)
        assert resp.status == 200
        used += resp.json()["usage"]["total_tokens"]
    status, _, events = stream_events(gateway.url + "/v1/chat/completions",
                                      {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                                       "stream": True, "stream_options": {"include_usage": True}}, headers)
    assert status == 200
    chunks = [msgspec.json.decode(e) for e in events if e != b"[DONE]"]
    used += next(c["usage"]["total_tokens"] for c in chunks if c.get("usage"))
    doc = settled_usage(gateway, policy_id, used)
    assert doc["value_key_usage_map"] == {run_tag: used}
    # a stream whose client did not ask for usage: the gateway asks the upstream for it and settles to it
    status, _, events = stream_events(gateway.url + "/v1/chat/completions",
                                      {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                                       "stream": True}, headers)
    assert status == 200
    assert not any(b'"usage"' in e and b'"total_tokens"' in e for e in events)
    used += count_tokens("hi") + count_tokens("one two three four five six seven eight")  # the mock's usage
    settled_usage(gateway, policy_id, used)


def test_cost_budgets_count_the_price_table_and_unknown_models_cost_nothing(served_gateway, mock):
    run_tag = tag()
    policy_id = usage_limit(served_gateway, run_tag, "cost", 1.0)
    headers = chat_headers(mock.scenario(), run_tag)
    micros = 0
    for _ in range(2):
        resp = chat(served_gateway.url, headers, model="gpt-4o-mini")
        usage = resp.json()["usage"]
        micros += Prices().cost_micros("vendorA", resp.json()["model"], usage["prompt_tokens"],
                                       usage["completion_tokens"])
    assert micros > 0
    settled_usage(served_gateway, policy_id, micros / 1e6)
    model = f"mystery-model-{run_tag}"
    assert chat(served_gateway.url, headers, model=model).status == 200
    time.sleep(0.5)
    assert get(served_gateway, USAGE, policy_id)["current_usage"] == micros / 1e6
    wait_for(lambda: f"no price for model '{model}'" in served_gateway.output())
    assert served_gateway.output().count(f"no price for model '{model}'") == 1
    wait_metric(served_gateway, "gateway_cost_unknown_models_total", 1, provider="vendorA")


def test_crossing_the_alert_threshold_records_one_alert_per_period(served_gateway, mock):
    run_tag = tag()
    policy_id = usage_limit(served_gateway, run_tag, "requests", 10, alert_threshold=2, periodic_reset="monthly")
    headers = chat_headers(mock.scenario(), run_tag)
    for _ in range(2):
        assert chat(served_gateway.url, headers).status == 200
    alerts = wait_for(lambda: get(served_gateway, USAGE, policy_id)["alerts"])
    assert len(alerts) == 1
    assert alerts[0]["value_key"] == run_tag and alerts[0]["usage"] >= 2 and alerts[0]["alert_threshold"] == 2
    for _ in range(2):
        assert chat(served_gateway.url, headers).status == 200
    settled_usage(served_gateway, policy_id, 4)
    assert len(get(served_gateway, USAGE, policy_id)["alerts"]) == 1
    assert served_gateway.output().count(f"policy 'usage {run_tag}' ({policy_id}) crossed its alert threshold") == 1


def test_archived_policies_stop_applying_and_updates_apply_at_once(gateway, mock):
    run_tag = tag()
    policy_id = rate_limit(gateway, run_tag, 0)
    headers = chat_headers(mock.scenario(), run_tag)
    assert chat(gateway.url, headers).status == 429
    assert request("DELETE", f"{gateway.url}{RATE}/{policy_id}", headers=ADMIN).status == 200
    assert chat(gateway.url, headers).status == 200
    assert request("PUT", f"{gateway.url}{RATE}/{policy_id}", body={"status": "active"}, headers=ADMIN).status == 200
    assert chat(gateway.url, headers).status == 429
    other = tag()
    moved = request("PUT", f"{gateway.url}{RATE}/{policy_id}",
                    body={"conditions": [{"key": "metadata.run", "value": other}]}, headers=ADMIN)
    assert moved.status == 200
    assert chat(gateway.url, headers).status == 200
    assert chat(gateway.url, chat_headers(mock.scenario(), other)).status == 429


def test_requests_no_policy_matches_are_untouched(gateway, mock):
    rate_limit(gateway, tag(), 0)
    headers = chat_headers(mock.scenario(), tag())
    assert statuses(concurrently([gateway.url], headers, 6)) == {200: 6}


def test_token_estimates_that_hold_overshoot_only_past_the_cut_reservations_under_concurrency(gateway, mock):
    """Every request asks max_tokens 40 and gets at most 40 tokens: a whole reservation is an upper bound of its
    request's usage, so however many requests race, the budget is exceeded only by requests admitted into a budget
    too spent for their whole estimate (their reservation cut to what remained), each by less than its estimate;
    with every reservation whole the budget is never exceeded."""
    run_tag = tag()
    limit = 600
    policy_id = usage_limit(gateway, run_tag, "tokens", limit)
    base = mock.scenario([{"reply": " ".join(["word"] * 30)}])  # about 38 completion tokens
    body = msgspec.json.encode({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                                "max_tokens": 40})
    estimate = -(-len(body) // 4) + 40  # what the gateway reserves: body bytes / 4 plus max_tokens
    answers = concurrently([gateway.url], chat_headers(base, run_tag), 24, max_tokens=40)
    admitted = [r for r in answers if r.status == 200]
    assert statuses(answers)[429] > 0 and admitted
    real = sum(r.json()["usage"]["total_tokens"] for r in admitted)
    whole = limit // estimate  # reservations the budget holds whole; any admitted past them was cut
    assert real <= limit + max(0, len(admitted) - whole) * (estimate - 1)
    settled_usage(gateway, policy_id, real)


def test_the_overshoot_is_bounded_by_the_usage_of_admitted_requests_beyond_their_reservations(gateway, mock):
    """The upstream answers far more than max_tokens (an estimate error of E tokens a request). A request is
    admitted while the budget is not spent, its reservation cut to what remains. One request at a time, the budget
    ends below its limit plus the last request's usage; racing requests each add at most their usage beyond their
    reservation (all whole estimates but at most one cut one, of at least 1)."""
    base = mock.scenario([{"reply": " ".join(["overlong"] * 100)}])
    limit = 400
    body = msgspec.json.encode({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                                "max_tokens": 5})
    estimate = -(-len(body) // 4) + 5  # what the gateway reserves: body bytes / 4 plus max_tokens

    sequential = tag()
    policy_id = usage_limit(gateway, sequential, "tokens", limit)
    headers = chat_headers(base, sequential)
    real: list[int] = []
    for _ in range(20):
        resp = chat(gateway.url, headers, max_tokens=5)
        if resp.status == 429:
            break
        assert resp.status == 200
        real.append(resp.json()["usage"]["total_tokens"])
        settled_usage(gateway, policy_id, sum(real))
    assert max(real) > estimate
    assert sum(real[:-1]) < limit <= sum(real)  # the last was admitted while the budget was not spent

    racing = tag()
    policy_id = usage_limit(gateway, racing, "tokens", limit)
    answers = concurrently([gateway.url], chat_headers(base, racing), 20, max_tokens=5)
    admitted = [r.json()["usage"]["total_tokens"] for r in answers if r.status == 200]
    assert 1 <= len(admitted) <= -(-limit // estimate)  # every reservation fitted what remained of the budget
    settled_usage(gateway, policy_id, sum(admitted))
    assert sum(admitted) <= limit + sum(t - estimate for t in admitted) + estimate - 1
    refused = chat(gateway.url, chat_headers(base, racing), max_tokens=5)
    assert refused.status == 429 and refused.json()["error"]["code"] == "usage_limit_exceeded"
    assert f"0 remaining, and this request's estimate is {estimate} tokens" in refused.json()["error"]["message"]
    wait_metric(gateway, "gateway_policy_rejections_total", 1, kind="usage_limit", policy=policy_id)


class CountingStore(MemoryStateStore):
    """A memory store that counts the calls the request path makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def reserve(self, *args, **kwargs):
        self.calls.append("reserve")
        return await super().reserve(*args, **kwargs)

    async def record_list(self, *args, **kwargs):
        self.calls.append("record_list")
        return await super().record_list(*args, **kwargs)


def request_parts(workspace: str, run: str):
    ctx = build_context([(b"x-gateway-api-key", b"k"), (b"x-gateway-metadata", b'{"run": "%s"}' % run.encode())])
    ctx.workspace = workspace
    body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
    plan = Planner(ConfigParser(config_checks())).plan(Config(provider="vendorA", api_key="sk"))
    return ctx, parse_chat(body), len(body), plan


async def test_a_workspace_without_policies_costs_a_lookup_and_no_store_call():
    store = CountingStore()
    gate = PolicyGate(store, Settings(), lambda key: "key-1")
    await gate.rate_limits.create(RateLimitPolicy(
        type="requests", unit="rpd", value=1, workspace_id="limited",
        conditions=[Condition("metadata.run", "r")], group_by=[GroupBy("workspace_id")]))
    await gate.start()
    try:
        store.calls.clear()
        ctx, chat_request, size, node = request_parts("free", "r")
        for _ in range(3):
            assert not gate.may_apply(ctx.workspace)
        assert store.calls == []
        limited = request_parts("limited", "r")
        assert gate.may_apply("limited")
        assert await gate.admit(*limited) is None  # admitted: request counts are final
        assert store.calls == ["reserve"]
        with pytest.raises(RateLimited):
            await gate.admit(*limited)
        unmatched = request_parts("limited", "other")
        assert await gate.admit(*unmatched) is None
        assert store.calls == ["reserve", "reserve"]  # a request no policy matches makes no store call
    finally:
        await gate.close()


async def test_requests_wait_for_a_reload_in_flight_instead_of_using_an_outdated_set():
    store = CountingStore()
    gate = PolicyGate(store, Settings(), lambda key: "key-1")
    await gate.start()
    try:
        await gate.rate_limits.create(RateLimitPolicy(
            type="requests", unit="rpd", value=0, workspace_id="ws",
            conditions=[Condition("metadata.run", "r")], group_by=[GroupBy("workspace_id")]))
        gate.invalidate()  # as the records watcher does: a reload starts in the background
        parts = request_parts("ws", "r")
        assert gate.may_apply("ws")
        outcomes = await asyncio.gather(*(gate.admit(*parts) for _ in range(5)), return_exceptions=True)
        assert all(isinstance(o, RateLimited) for o in outcomes)
    finally:
        await gate.close()


async def test_a_stored_policy_that_cannot_be_compiled_is_skipped_and_the_others_still_apply(monkeypatch):
    from gateway.policies import gate as gate_module

    store = CountingStore()
    gate = PolicyGate(store, Settings(), lambda key: "key-1")
    conditions, group = [Condition("metadata.run", "r")], [GroupBy("workspace_id")]
    enforced = await gate.rate_limits.create(RateLimitPolicy(
        type="requests", unit="rpd", value=0, workspace_id="ws", conditions=conditions, group_by=group))
    broken = await gate.rate_limits.create(RateLimitPolicy(
        type="requests", unit="rpd", value=5, workspace_id="ws", conditions=conditions, group_by=group))
    real = gate_module.CompiledPolicy

    def compile_or_fail(record):
        if record.id == broken.id:
            raise ValueError("a record this build cannot read")
        return real(record)

    monkeypatch.setattr(gate_module, "CompiledPolicy", compile_or_fail)
    await gate.start()
    try:
        with pytest.raises(RateLimited) as refused:
            await gate.admit(*request_parts("ws", "r"))
        assert enforced.id in refused.value.message
    finally:
        await gate.close()


async def test_policies_that_cannot_be_read_keep_requests_flowing(monkeypatch):
    store = CountingStore()
    gate = PolicyGate(store, Settings(), lambda key: "key-1")

    async def unreadable(*args, **kwargs):
        raise msgspec.ValidationError("Expected `int`, got `str` - at `$.value`")

    monkeypatch.setattr(gate.usage_limits, "list", unreadable)
    await gate.start()
    try:
        assert await gate.admit(*request_parts("ws", "r")) is None  # fail open, as when the store is down
    finally:
        await gate.close()
