"""``GET /metrics`` access by key: the series cover every workspace's traffic, so only the root key reads them."""

from __future__ import annotations

from tests.support.controlplane import create_key
from tests.support.http import request
from tests.support.servers import ADMIN_KEY


def scrape(gateway, key: str | None):
    return request("GET", f"{gateway.url}/metrics", headers={"x-gateway-api-key": key} if key else {})


def test_only_the_root_key_reads_metrics(gateway):
    assert scrape(gateway, ADMIN_KEY).status == 200
    # a workspace's own admin key (and a member key) would see every other workspace's traffic
    for key in (create_key(gateway)["key"], create_key(gateway, role="member")["key"]):
        resp = scrape(gateway, key)
        assert resp.status == 403, resp.text
        assert resp.json()["error"]["param"] == "x-gateway-api-key" and "root" in resp.json()["error"]["message"]
    missing = scrape(gateway, None)
    assert missing.status == 401 and missing.json()["error"]["param"] == "x-gateway-api-key"
