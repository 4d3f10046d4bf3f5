"""``GET /v1/logs`` filters the console uses: a status class (``4xx``) and the model."""

from __future__ import annotations

import uuid

from tests.support.headers import headers_for
from tests.support.http import post, request
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def test_status_class_and_model_filters(gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    ok, failing = mock.scenario(), mock.scenario([{"status": 404}, {"status": 500}])
    assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(ok + "/v1", trace_id=trace)).status == 200
    for _ in range(2):
        post(f"{gateway.url}/v1/chat/completions", {**CHAT, "model": "gpt-4o"},
             headers_for(failing + "/v1", trace_id=trace))

    def statuses(query: str) -> list[int]:
        resp = request("GET", f"{gateway.url}/v1/logs?trace_id={trace}{query}",
                       headers={"x-gateway-api-key": ADMIN_KEY})
        assert resp.status == 200, resp.text
        return [item["status"] for item in resp.json()["data"]]

    wait_logs(gateway, trace, 3)
    assert statuses("") == [500, 404, 200]
    assert statuses("&status=4xx") == [404] and statuses("&status=5XX") == [500] and statuses("&status=2xx") == [200]
    assert statuses("&model=gpt-4o") == [500, 404] and statuses("&model=gpt-4o-mini") == [200]
    assert statuses("&model=gpt-4o&status=5xx") == [500]
    assert statuses("&model=nothing") == []


def test_an_after_id_past_what_a_log_id_can_be_is_a_400_naming_it(gateway):
    for value in (str(2**63), str(10**30)):
        resp = request("GET", f"{gateway.url}/v1/logs?after={value}", headers={"x-gateway-api-key": ADMIN_KEY})
        assert resp.status == 400, resp.text
        assert resp.json()["error"]["param"] == "after"
    largest = request("GET", f"{gateway.url}/v1/logs?after={2**63 - 1}", headers={"x-gateway-api-key": ADMIN_KEY})
    assert largest.status == 200, largest.text
