"""The same user-visible behaviour with the compiled speedups switched off (GATEWAY_NO_EXTENSIONS=1)."""

from __future__ import annotations

import msgspec
import pytest

from tests.support.http import post, request, stream_events
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def pure_gateway():
    server = start_gateway({"GATEWAY_NO_EXTENSIONS": "1"})
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["compiled", "pure"])
def any_gateway(request, gateway, pure_gateway):
    return gateway if request.param == "compiled" else pure_gateway


def test_health_reports_the_implementation_in_use(gateway, pure_gateway):
    import os

    pure = request("GET", pure_gateway.url + "/health").json()["speedups"]
    assert set(pure.values()) == {"pure"}
    compiled = request("GET", gateway.url + "/health").json()["speedups"]
    expected = "pure" if os.environ.get("GATEWAY_NO_EXTENSIONS") == "1" else "compiled"
    assert set(compiled.values()) == {expected}


def test_streamed_chat_is_identical_on_both_paths(any_gateway, mock, gw_headers):
    status, _, events = stream_events(f"{any_gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                      gw_headers(mock.url + "/v1"))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    text = "".join(msgspec.json.decode(p)["choices"][0]["delta"].get("content", "") for p in payloads[:-1])
    assert text.startswith("Hello from the gateway mock upstream")


def test_conditional_routing_on_both_paths(any_gateway, mock):
    a, b = mock.scenario(), mock.scenario()
    config = {"strategy": {"mode": "conditional", "default": "b",
                           "conditions": [{"query": {"params.temperature": {"$lt": 0.5}}, "then": "a"}]},
              "targets": [{"provider": "vendorA", "api_key": "k", "custom_host": a + "/v1", "name": "a"},
                          {"provider": "vendorA", "api_key": "k", "custom_host": b + "/v1", "name": "b"}]}
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode()}
    resp = post(f"{any_gateway.url}/v1/chat/completions", {**CHAT, "temperature": 0.2}, headers)
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[0]"
    resp = post(f"{any_gateway.url}/v1/chat/completions", {**CHAT, "temperature": 0.9}, headers)
    assert resp.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
