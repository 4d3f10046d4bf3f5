"""Token and cost budgets through the real gateway, on the embedded store and on Redis: a request is admitted while
its budget is not spent (an estimate larger than the whole budget included), its reservation cut to what remains;
it settles to its real usage; once spent, requests are refused with a message saying what is used, the request's
estimate and what remains; racing requests end the budget at most their usage beyond their reservations above it."""

from __future__ import annotations

import re

import msgspec
import pytest

from gateway.observability.cost import Prices
from gateway.settings import Settings
from tests.support.controlplane import clear_redis_prefix
from tests.support.inprocess import start_in_process
from tests.support.policies import USAGE, chat, chat_headers, concurrently, get, tag, usage_limit
from tests.support.poll import wait_for
from tests.support.redis_servers import random_prefix, test_redis_url

BODY = msgspec.json.encode({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
#: what the gateway reserves for that body without max_tokens: body bytes / 4 plus the default output cap
ESTIMATE = -(-len(BODY) // 4) + Settings().policy_output_tokens
REFUSED = re.compile(r"exceeded: ([\d.e-]+) of ([\d.e-]+) (tokens|USD) used, ([\d.e-]+) remaining, and this "
                     r"request's estimate is ([\d.e-]+) (tokens|USD); requests are refused")


@pytest.fixture(scope="module", params=["embedded", "redis"])
def gw(request):
    """The session gateway (embedded store), or one on the test Redis under a key prefix of its own."""
    if request.param == "embedded":
        yield request.getfixturevalue("gateway")
        return
    url, prefix = test_redis_url(), random_prefix()
    server = start_in_process({"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix})
    try:
        yield server
    finally:
        server.stop()
        clear_redis_prefix(url, prefix)


def usage_of(gw, policy_id: str, expected: float) -> dict:
    return wait_for(lambda: (doc := get(gw, USAGE, policy_id))["current_usage"] == expected and doc)


def refusal_numbers(resp) -> tuple[float, float, str, float, float]:
    assert resp.status == 429, resp.text
    error = resp.json()["error"]
    assert error["code"] == "usage_limit_exceeded"
    found = REFUSED.search(error["message"])
    assert found, error["message"]
    used, limit, unit, left, estimate = found.group(1, 2, 3, 4, 5)
    return float(used), float(limit), unit, float(left), float(estimate)


def test_a_token_budget_smaller_than_one_estimate_admits_its_first_request_and_settles_to_real_usage(gw, mock):
    run_tag = tag()
    policy_id = usage_limit(gw, run_tag, "tokens", 10)
    headers = chat_headers(mock.scenario(), run_tag)
    first = chat(gw.url, headers)  # no max_tokens: it reserves ESTIMATE, cut to the 10 left
    assert first.status == 200, first.text
    real = first.json()["usage"]["total_tokens"]
    assert real > 10
    usage_of(gw, policy_id, real)
    used, limit, unit, left, estimate = refusal_numbers(chat(gw.url, headers))
    assert (used, limit, unit, left, estimate) == (real, 10, "tokens", 0, ESTIMATE)


def test_a_cost_budget_smaller_than_one_estimate_admits_its_first_request_and_settles_to_real_cost(gw, mock):
    run_tag = tag()
    limit_usd = 0.000002
    policy_id = usage_limit(gw, run_tag, "cost", limit_usd)
    headers = chat_headers(mock.scenario([{"reply": " ".join(["word"] * 40)}]), run_tag)
    first = chat(gw.url, headers)
    assert first.status == 200, first.text
    usage = first.json()["usage"]
    real = Prices().cost_micros("vendorA", first.json()["model"], usage["prompt_tokens"], usage["completion_tokens"])
    assert real > 2
    usage_of(gw, policy_id, real / 1e6)
    used, limit, unit, left, estimate = refusal_numbers(chat(gw.url, headers))
    assert (used, limit, unit, left) == (real / 1e6, limit_usd, "USD", 0)
    assert estimate == Prices().cost_micros("vendorA", "gpt-4o-mini", -(-len(BODY) // 4),
                                            Settings().policy_output_tokens) / 1e6


def test_racing_requests_against_a_small_budget_settle_and_overshoot_by_at_most_their_usage_past_the_cut(gw, mock):
    """Eight requests in flight together against 10 tokens: the first reserved takes the 10 left (its estimate
    cut) and spends the budget, so the others are refused; it settles to its real usage, which leaves the budget
    above its limit by exactly that usage beyond its cut reservation (the documented bound); later requests are
    refused."""
    run_tag = tag()
    limit = 10
    policy_id = usage_limit(gw, run_tag, "tokens", limit)
    headers = chat_headers(mock.scenario([{"delay_ms": 400}]), run_tag)
    answers = concurrently([gw.url], headers, 8)
    admitted = [r.json()["usage"]["total_tokens"] for r in answers if r.status == 200]
    assert len(admitted) == 1, [r.status for r in answers]
    for resp in (r for r in answers if r.status != 200):
        used, _, _, left, estimate = refusal_numbers(resp)
        assert used >= limit and left == 0 and estimate == ESTIMATE
    real = admitted[0]
    usage_of(gw, policy_id, real)  # settled: the limit plus its usage beyond its cut reservation of 10
    used, _, _, left, _ = refusal_numbers(chat(gw.url, headers))  # spent: later requests are refused
    assert used == real and left == 0
