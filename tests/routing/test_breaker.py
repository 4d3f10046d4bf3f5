"""Circuit breaker: opens after the threshold, skips the target during cooldown, half-opens after it.

The gateway app runs in-process here with an injected clock, against the real mock upstream, so the 30 s
minimum cooldown passes without waiting.
"""

from __future__ import annotations

import msgspec
import pytest

from gateway.api.runtime import Runtime
from gateway.app import GatewayApp
from gateway.routing.breaker import CircuitBreaker, counts_as_failure
from gateway.settings import load
from gateway.state.memory import MemoryStateStore
from tests.support.asgi import call
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def app_and_clock(tmp_path):
    clock = Clock()
    settings = load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_DATA_DIR": str(tmp_path),
                     "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1"})
    runtime = Runtime(settings, store=MemoryStateStore(clock=clock), breaker_clock=clock)
    await runtime.start()
    yield GatewayApp(runtime), clock
    await runtime.close()


def headers_for(config: dict) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode()}


async def test_breaker_opens_skips_and_recovers_after_cooldown(app_and_clock, mock):
    app, clock = app_and_clock
    # fails 3 times, then healthy
    flaky, backup = mock.scenario([{"status": 500, "times": 3}, {}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "k", "custom_host": flaky + "/v1",
         "cb_config": {"failure_threshold": 3, "cooldown_interval": 30000}},
        {"provider": "vendorA", "api_key": "k", "custom_host": backup + "/v1"}]}
    for _ in range(3):
        resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config))
        assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert mock.calls(flaky)["calls"] == 3
    # open: skipped for the cooldown
    clock.now += 29
    resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config))
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert mock.calls(flaky)["calls"] == 3
    # cooldown over: tried again (half-open), succeeds, closes
    clock.now += 2
    resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers_for(config))
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
