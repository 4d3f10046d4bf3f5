"""Circuit breaker: opens after the threshold of failures within the window, skips the target during cooldown,
half-opens after it; one breaker per target shared by every worker and instance.

Most tests run the gateway app in-process with an injected clock, against the real mock upstream, so the 30 s
minimum cooldown passes without waiting; the sharing tests run real gateway processes.
"""

from __future__ import annotations

import pytest
import redis

from gateway.app import GatewayApp
from gateway.routing.breaker import CircuitBreaker, counts_as_failure
from gateway.runtime import Runtime
from gateway.settings import load
from gateway.state.base import StateStoreUnavailable
from gateway.state.memory import MemoryStateStore
from tests.support.asgi import call, in_process
from tests.support.headers import headers_for
from tests.support.http import post, request
from tests.support.inprocess import start_in_process
from tests.support.redis_servers import random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def app_and_clock(tmp_path):
    clock = Clock()
    async with in_process({"GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1"}, str(tmp_path),
                          store=MemoryStateStore(clock=clock), breaker_clock=clock) as app:
        yield app, clock


async def test_breaker_opens_skips_and_recovers_after_cooldown(app_and_clock, mock):
    app, clock = app_and_clock
    # fails 3 times, then healthy
    flaky, backup = mock.scenario([{"status": 500, "times": 3}, {}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "k", "custom_host": flaky + "/v1",
         "cb_config": {"failure_threshold": 3, "cooldown_interval": 30000}},
        {"provider": "vendorA", "api_key": "k", "custom_host": backup + "/v1"}]}
    for _ in range(3):
        resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config=config))
        assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert mock.calls(flaky)["calls"] == 3
    # open: skipped for the cooldown
    clock.now += 29
    resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config=config))
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert mock.calls(flaky)["calls"] == 3
    # cooldown over: tried again (half-open), succeeds, closes
    clock.now += 2
    resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config=config))
    assert resp.status == 200
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[0]"
    assert mock.calls(flaky)["calls"] == 4


async def test_a_failed_probe_after_cooldown_reopens_at_once():
    clock = Clock()
    breaker = CircuitBreaker(MemoryStateStore(clock=clock), clock)
    assert not await breaker.record_failure("t", 2, 30000)
    assert await breaker.record_failure("t", 2, 30000)
    assert await breaker.is_open("t")
    clock.now += 31
    assert not await breaker.is_open("t")
    assert await breaker.record_failure("t", 2, 30000)  # one failure while half-open reopens
    assert await breaker.is_open("t")
    clock.now += 31
    await breaker.record_success("t")
    assert not await breaker.record_failure("t", 2, 30000)  # closed again: the count starts over


def test_which_statuses_count_as_failures():
    assert counts_as_failure(500, None) and counts_as_failure(429, None) and counts_as_failure(408, None)
    assert not counts_as_failure(400, None) and not counts_as_failure(404, None)
    assert counts_as_failure(404, [404]) and not counts_as_failure(500, [404])


async def test_a_target_failing_every_other_request_opens_its_breaker(app_and_clock, mock):
    app, clock = app_and_clock
    flaky = mock.scenario([{"status": 500}, {}, {"status": 500}, {}, {"status": 500}, {}])
    backup = mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "k", "custom_host": flaky + "/v1",
         "cb_config": {"failure_threshold": 3, "cooldown_interval": 30000}},
        {"provider": "vendorA", "api_key": "k", "custom_host": backup + "/v1"}]}
    used = []
    for _ in range(6):
        resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config=config))
        assert resp.status == 200
        used.append(resp.headers["x-gateway-last-used-option-index"])
        clock.now += 1
    # failures at requests 1, 3, 5 (successes between do not erase them): open after the fifth
    assert used == ["config.targets[1]", "config.targets[0]"] * 2 + ["config.targets[1]"] * 2
    assert mock.calls(flaky)["calls"] == 5


async def test_failures_further_apart_than_the_window_never_open_it():
    clock = Clock()
    breaker = CircuitBreaker(MemoryStateStore(clock=clock), clock)
    for _ in range(5):
        assert not await breaker.record_failure("t", 2, 30000)
        clock.now += 31  # the window is the cooldown: 30 s
    assert not await breaker.is_open("t")


class DownStore(MemoryStateStore):
    """A store whose every breaker call fails as an unreachable Redis would."""

    async def breaker_open_until(self, key):
        raise StateStoreUnavailable("down")

    async def breaker_failure(self, *args):
        raise StateStoreUnavailable("down")

    async def breaker_success(self, *args):
        raise StateStoreUnavailable("down")


async def test_an_unreachable_store_never_blocks_traffic(tmp_path, mock):
    settings = load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_DATA_DIR": str(tmp_path),
                     "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1"})
    runtime = Runtime(settings, store=DownStore())
    app = GatewayApp(runtime)  # before the start: the app adds its routes' services to the runtime's lifecycle
    await runtime.start()
    try:
        flaky = mock.scenario([{"status": 500, "times": 2}, {}])
        config = {"provider": "vendorA", "api_key": "k", "custom_host": flaky + "/v1",
                  "cb_config": {"failure_threshold": 1, "cooldown_interval": 30000}}
        statuses = [(await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config=config))).status
                    for _ in range(3)]
        assert statuses == [500, 500, 200]  # the breaker could not open, so the target was tried each time
    finally:
        await runtime.close()


def failing_config(flaky: str) -> dict:
    return {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "k", "custom_host": flaky + "/v1",
         "cb_config": {"failure_threshold": 3, "cooldown_interval": 60000}},
        {"provider": "vendorA", "api_key": "k", "custom_host": flaky.replace("/s/", "/s/ok-") + "/v1"}]}


def send_through(urls: list[str], config: dict, count: int) -> None:
    headers = headers_for(config=config) | {"content-type": "application/json"}
    for i in range(count):  # a fresh connection per request, so every worker takes some
        resp = post(urls[i % len(urls)] + "/v1/chat/completions", CHAT, headers)
        assert resp.status == 200, resp.text


def test_workers_of_one_gateway_share_each_breaker(mock):
    flaky = mock.scenario([{"status": 500}])
    mock.scenario(name="ok-" + flaky.rsplit("/s/", 1)[1])
    server = start_gateway(workers=2)
    try:
        send_through([server.url], failing_config(flaky), 12)
    finally:
        server.stop()
    assert mock.calls(flaky)["calls"] == 3  # one breaker for both workers: opened after 3 failures in all


def test_gateway_instances_sharing_redis_share_each_breaker(mock):
    url, prefix = test_redis_url(), random_prefix()
    env = {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix,
           "GATEWAY_STATE_TIMEOUT_MS": "5000"}  # a busy test box is slow
    flaky = mock.scenario([{"status": 500}])
    mock.scenario(name="ok-" + flaky.rsplit("/s/", 1)[1])
    first, second = start_in_process(env), start_in_process(env)
    try:
        assert request("GET", first.url + "/health").json()["state"]["backend"] == "redis"
        send_through([first.url, second.url], failing_config(flaky), 12)
    finally:
        first.stop()
        second.stop()
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=prefix + "*"):
            client.delete(key)
        client.close()
    assert mock.calls(flaky)["calls"] == 3
