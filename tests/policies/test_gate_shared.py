"""Exactness where it is hard: two workers on the embedded store, two instances sharing a real Redis; and what
limits do while Redis is down (fail open, fail closed)."""

from __future__ import annotations

import time

from tests.support.http import request
from tests.support.inprocess import start_in_process
from tests.support.policies import (
    ADMIN,
    chat,
    chat_headers,
    concurrently,
    rate_limit,
    same_day,
    statuses,
    tag,
    usage_limit,
)
from tests.support.poll import wait_for
from tests.support.redis_servers import RedisProcess, random_prefix, test_redis_url
from tests.support.servers import start_gateway

FAST_WATCH = {"GATEWAY_STATE_WATCH_INTERVAL_MS": "100"}
PROPAGATION_S = 1.0  # a policy reaches every worker and instance within a second


def exactly_n(urls: list[str], creator, base: str, n: int = 6, requests: int = 24) -> None:
    """A rate limit of ``n`` per day admits exactly ``n`` of ``requests`` racing requests spread over ``urls``."""

    def run():
        run_tag = tag()
        rate_limit(creator, run_tag, n)
        time.sleep(PROPAGATION_S)
        return concurrently(urls, chat_headers(base, run_tag), requests)

    assert statuses(same_day(run)) == {200: n, 429: requests - n}


def test_two_workers_on_the_embedded_store_admit_exactly_n(mock):
    server = start_gateway(FAST_WATCH, workers=2)
    try:
        base = mock.scenario()
        exactly_n([server.url], server, base)
        # a usage budget too: exactly n of the racing requests
        run_tag = tag()
        usage_limit(server, run_tag, "requests", 4)
        time.sleep(PROPAGATION_S)
        assert statuses(concurrently([server.url], chat_headers(base, run_tag), 20)) == {200: 4, 429: 16}
    finally:
        server.stop()


def test_two_instances_sharing_redis_admit_exactly_n(mock):
    shared = {"GATEWAY_REDIS_URL": test_redis_url(), "GATEWAY_REDIS_KEY_PREFIX": random_prefix(), **FAST_WATCH}
    first = start_in_process(shared)
    second = start_in_process(shared)
    try:
        base = mock.scenario()
        exactly_n([first.url, second.url], first, base)
        run_tag = tag()
        policy_id = usage_limit(first, run_tag, "tokens", 100_000)
        time.sleep(PROPAGATION_S)
        answers = concurrently([first.url, second.url], chat_headers(base, run_tag), 10, max_tokens=100)
        used = sum(r.json()["usage"]["total_tokens"] for r in answers)
        for server in (first, second):  # both instances read the one settled counter
            wait_for(lambda server=server: request("GET", f"{server.url}/v1/policies/usage-limits/{policy_id}",
                                                     headers=ADMIN).json()["current_usage"] == used)
    finally:
        first.stop()
        second.stop()


def test_limits_follow_the_fail_mode_while_redis_is_down(mock):
    redis = RedisProcess().start()
    common = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_PROBE_INTERVAL_MS": "100",
              "GATEWAY_STATE_TIMEOUT_MS": "300", **FAST_WATCH}
    closed = start_in_process(common | {"GATEWAY_STATE_FAIL_MODE": "closed"})
    opened = start_in_process(common)
    try:
        base = mock.scenario()
        run_tag = tag()
        rate_limit(closed, run_tag, 1000)
        time.sleep(PROPAGATION_S)
        limited, free = chat_headers(base, run_tag), chat_headers(base, tag())
        for server in (closed, opened):
            assert chat(server.url, limited).status == 200
        redis.stop()
        for server in (closed, opened):
            wait_for(lambda server=server: not request("GET", server.url + "/health").json()["state"]["healthy"])
        refused = chat(closed.url, limited)
        assert refused.status == 503 and refused.json()["error"]["code"] == "service_unavailable"
        assert chat(closed.url, free).status == 200  # no policy applies: nothing to refuse
        assert chat(opened.url, limited).status == 200  # fail open: admitted without counting
        redis.start()
        wait_for(lambda: chat(closed.url, limited).status == 200, timeout=20)
    finally:
        closed.stop()
        opened.stop()
        redis.stop()
