"""A Redis outage as users see it: requests keep flowing, /health reports the store, /ready follows the fail
mode (503 while down only when limits fail closed), errors are counted, and the gateway reconnects by itself."""

from __future__ import annotations

import msgspec

from tests.support.http import post, request
from tests.support.poll import wait_for
from tests.support.redis_servers import RedisProcess
from tests.support.servers import ADMIN_KEY, start_gateway

OUTAGE_S = 20.0  # each wait: a probe every 100 ms, generous on a loaded box
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def state_of(url: str) -> dict:
    return request("GET", url + "/health").json()["state"]


def test_redis_down_then_back(mock):
    redis = RedisProcess().start()
    common = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_PROBE_INTERVAL_MS": "100",
              "GATEWAY_STATE_TIMEOUT_MS": "300"}
    closed = start_gateway(common | {"GATEWAY_STATE_FAIL_MODE": "closed"})
    opened = start_gateway(common)
    try:
        assert wait_for(lambda: state_of(closed.url) == {"backend": "redis", "healthy": True,
                                                         "fail_mode": "closed"}, OUTAGE_S)
        assert wait_for(lambda: request("GET", closed.url + "/ready").status == 200, OUTAGE_S)
        redis.stop()
        assert wait_for(lambda: not state_of(closed.url)["healthy"], OUTAGE_S)
        assert wait_for(lambda: request("GET", closed.url + "/ready").status == 503, OUTAGE_S)
        assert wait_for(lambda: not state_of(opened.url)["healthy"], OUTAGE_S)
        assert request("GET", opened.url + "/ready").status == 200  # fail open: stays in rotation
        base = mock.scenario()
        config = {"provider": "vendorA", "api_key": "k", "custom_host": base + "/v1",
                  "cb_config": {"failure_threshold": 1, "cooldown_interval": 30000}}
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
                   "content-type": "application/json"}
        for server in (closed, opened):
            assert post(server.url + "/v1/chat/completions", CHAT, headers).status == 200
        # a saved config this worker has not cached needs the store: a 503 in words, no internal class names
        saved = post(opened.url + "/v1/chat/completions", CHAT, {**headers, "x-gateway-config": "pc-not-cached"})
        assert saved.status == 503, saved.text
        assert "store" in saved.json()["error"]["message"] and "StateStore" not in saved.text, saved.text
        listed = request("GET", opened.url + "/v1/configs", headers={"x-gateway-api-key": ADMIN_KEY})
        assert listed.status == 503 and "StateStore" not in listed.text, listed.text
        metrics = {"x-gateway-api-key": ADMIN_KEY}
        assert wait_for(lambda: "gateway_state_store_errors_total{" in request(
            "GET", closed.url + "/metrics", headers=metrics).text, timeout=10)
        redis.start()
        assert wait_for(lambda: state_of(closed.url)["healthy"], OUTAGE_S)
        assert wait_for(lambda: request("GET", closed.url + "/ready").status == 200, OUTAGE_S)
    finally:
        closed.stop()
        opened.stop()
        redis.stop()
