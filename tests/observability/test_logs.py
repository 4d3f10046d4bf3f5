"""Request logs through the real gateway: ``GET /v1/logs`` (fields, filters, paging, errors), the JSON lines on
stdout, masking of secrets and opt-in bodies."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from tests.support.headers import headers_for
from tests.support.http import post, request, stream_events
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def hashed(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


def logs(gateway, query: str = "", key: str = ADMIN_KEY):
    return request("GET", f"{gateway.url}/v1/logs{query}", headers={"x-gateway-api-key": key})


def test_a_request_is_listed_within_five_seconds_with_its_details(gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    extra = {"x-gateway-metadata": '{"_user": "u1", "team": "blue"}', "x-gateway-span-name": "my-span"}
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                headers_for(mock.scenario() + "/v1", trace_id=trace, **extra))
    assert resp.status == 200
    body = logs(gateway, f"?trace_id={trace}")
    (item,) = wait_logs(gateway, trace)
    assert body.json()["object"] == "list"
    assert item["trace_id"] == trace and item["span_name"] == "my-span"
    assert item["workspace"] == "default" and item["endpoint"] == "chat"
    assert item["provider"] == "vendorA" and item["model"] == "gpt-4o-mini" and item["status"] == 200
    assert item["latency_ms"] > 0 and item["upstream_latency_ms"] > 0
    assert 0 <= item["gateway_latency_ms"] <= item["latency_ms"]
    usage = resp.json()["usage"]
    assert item["prompt_tokens"] == usage["prompt_tokens"]
    assert item["completion_tokens"] == usage["completion_tokens"]
    assert item["total_tokens"] == usage["total_tokens"]
    assert item["cost_usd"] > 0  # a model in the price table
    assert item["target"] == "config" and item["retries"] == 0 and item["cache_status"] == "DISABLED"
    assert item["metadata"] == {"_user": "u1", "team": "blue"}
    assert item["id"] and item["error"] is None
    assert abs(datetime.fromisoformat(item["time"]).timestamp() - time.time()) < 60
    assert "request_body" not in item and "response_body" not in item  # bodies are opt-in


def test_streams_are_logged_with_time_to_first_token_and_usage(gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    status, _, events = stream_events(
        f"{gateway.url}/v1/chat/completions",
        {**CHAT, "stream": True, "stream_options": {"include_usage": True}},
        headers_for(mock.scenario() + "/v1", trace_id=trace))
    assert status == 200 and list(events)[-1] == b"[DONE]"
    (item,) = wait_logs(gateway, trace)
    assert item["stream"] is True and item["status"] == 200
    assert 0 < item["ttft_ms"] <= item["latency_ms"]
    assert item["completion_tokens"] > 0


def test_the_answering_target_and_errors_are_logged(gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    bad, good = mock.scenario([{"status": 503}]), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "sk-cfg-key-0001", "custom_host": bad + "/v1"},
        {"provider": "vendorA", "api_key": "sk-cfg-key-0002", "custom_host": good + "/v1"}]}
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
               "content-type": "application/json", "x-gateway-trace-id": trace}
    assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers).status == 200
    failing = mock.scenario([{"status": 400, "message": "model is not supported"}])
    assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(failing + "/v1", trace_id=trace)).status == 400
    items = wait_logs(gateway, trace, 2)
    failed, answered = items  # newest first
    assert answered["target"] == "config.targets[1]" and answered["fallbacks"] == 1
    assert failed["status"] == 400 and "model is not supported" in failed["error"]
    text = logs(gateway, f"?trace_id={trace}").text
    assert "sk-cfg-key-0001" not in text and "sk-cfg-key-0002" not in text


def test_filters_and_paging(gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    base = mock.scenario()
    for _ in range(5):
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(base + "/v1", trace_id=trace)).status == 200
    failing = mock.scenario([{"status": 500}])
    assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(failing + "/v1", trace_id=trace)).status == 500
    everything = wait_logs(gateway, trace, 6)
    assert len(everything) == 6
    # newest first, pages of 2 chained with the cursor
    seen: list[str] = []
    query = f"?trace_id={trace}&limit=2"
    while True:
        page = logs(gateway, query).json()
        assert len(page["data"]) <= 2
        seen += [item["id"] for item in page["data"]]
        if not page["has_more"]:
            break
        query = f"?trace_id={trace}&limit=2&after={page['data'][-1]['id']}"
    assert seen == [item["id"] for item in everything]
    assert everything[0]["status"] == 500
    # status and provider
    assert [i["status"] for i in logs(gateway, f"?trace_id={trace}&status=500").json()["data"]] == [500]
    assert len(logs(gateway, f"?trace_id={trace}&status=200").json()["data"]) == 5
    assert len(logs(gateway, f"?trace_id={trace}&provider=vendorA").json()["data"]) == 6
    assert logs(gateway, f"?trace_id={trace}&provider=anthropic").json() == {
        "object": "list", "data": [], "has_more": False}
    # time range, as unix seconds and as ISO 8601
    now = time.time()
    assert len(logs(gateway, f"?trace_id={trace}&from={now - 120:.3f}&to={now + 5:.3f}").json()["data"]) == 6
    assert logs(gateway, f"?trace_id={trace}&from={now + 3600:.0f}").json()["data"] == []
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert logs(gateway, f"?trace_id={trace}&to={past}").json()["data"] == []
    assert len(logs(gateway, f"?trace_id={trace}&from={past}").json()["data"]) == 6
    # without filters the newest requests of the workspace come first
    latest = logs(gateway, "?limit=1").json()
    assert len(latest["data"]) == 1 and latest["has_more"] is True


@pytest.mark.parametrize("query, param", [
    ("status=abc", "status"), ("status=99", "status"), ("limit=0", "limit"), ("limit=101", "limit"),
    ("limit=many", "limit"), ("after=-3", "after"), ("after=x", "after"), ("from=yesterday", "from"),
    ("to=2024-13-01", "to"), ("from=nan", "from"), ("trace_id=", "trace_id"), ("from=200&to=100", "from"),
])
def test_bad_filters_are_400_naming_the_parameter(gateway, query, param):
    resp = logs(gateway, f"?{query}")
    assert resp.status == 400
    assert resp.json()["error"]["param"] == param


def test_logs_need_a_gateway_key(gateway):
    resp = request("GET", f"{gateway.url}/v1/logs")
    assert resp.status == 401
    assert logs(gateway, key="not-a-key").status == 401


@pytest.fixture(scope="module")
def masking_gateway(mock_server):
    server = start_gateway({"ORGANISATION_HEADERS_TO_MASK": "X-Org-Token", "GATEWAY_LOG_BODIES": "1"})
    yield server
    server.stop()


def test_secrets_are_hashed_in_logs_and_stdout(masking_gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    token, sensitive, org = "sk-provider-secret-9f8e7d", "hush-value-123456", "org-token-abcdef"
    base = mock.scenario([{}, {"status": 401, "message": f"Incorrect API key provided: {token}"}])
    headers = headers_for(base + "/v1", token=token, trace_id=trace, **{
        "x-gateway-sensitive-headers": "x-secret", "x-secret": sensitive, "x-org-token": org, "x-team": "blue"})
    assert post(f"{masking_gateway.url}/v1/chat/completions", CHAT, headers).status == 200
    assert post(f"{masking_gateway.url}/v1/chat/completions", CHAT, headers).status == 401
    items = wait_logs(masking_gateway, trace, 2)
    listed = logs(masking_gateway, f"?trace_id={trace}").text
    deadline = time.monotonic() + 5
    while listed.count(trace) > masking_gateway.output().count(trace) and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = [line for line in masking_gateway.output().splitlines() if trace in line]
    assert len(lines) == 2
    for text in (listed, *lines):
        for secret in (token, sensitive, org, ADMIN_KEY):
            assert secret not in text
        for secret in (token, sensitive, org):
            assert hashed(secret) in text
    logged_headers = items[1]["request_headers"]
    assert logged_headers["authorization"] == f"Bearer {hashed(token)}"
    assert logged_headers["x-secret"] == hashed(sensitive) and logged_headers["x-org-token"] == hashed(org)
    assert logged_headers["x-team"] == "blue"
    assert hashed(token) in items[0]["error"]  # the upstream echoed the key: hashed there too
    assert all(msgspec.json.decode(line)["trace_id"] == trace for line in lines)  # whole JSON lines


def test_bodies_are_logged_only_when_enabled(masking_gateway, gateway, mock):
    trace = f"trace-{uuid.uuid4().hex}"
    resp = post(f"{masking_gateway.url}/v1/chat/completions", CHAT,
                headers_for(mock.scenario() + "/v1", trace_id=trace))
    assert resp.status == 200
    (item,) = wait_logs(masking_gateway, trace)
    assert item["request_body"]["messages"] == CHAT["messages"]
    assert item["response_body"] == resp.json()
    plain = f"trace-{uuid.uuid4().hex}"
    assert post(f"{gateway.url}/v1/chat/completions", CHAT,
                headers_for(mock.scenario() + "/v1", trace_id=plain)).status == 200
    (item,) = wait_logs(gateway, plain)
    assert "request_body" not in item and "response_body" not in item


def test_the_model_filter_reads_an_index_not_every_row(tmp_path):
    import sqlite3

    from gateway.observability.logstore import LogFilter, LogStore

    store = LogStore(str(tmp_path / "logs.db"))
    store.insert([(1.0, "w", "t1", 200, "p", "m-1", b'{"model":"m-1"}'),
                  (2.0, "w", "t2", 200, "p", "m-2", b'{"model":"m-2"}')])
    assert [doc for _, doc in store.query("w", LogFilter(model="m-2"))[0]] == [b'{"model":"m-2"}']
    store.close()
    conn = sqlite3.connect(tmp_path / "logs.db")
    plan = conn.execute("EXPLAIN QUERY PLAN SELECT id FROM request_logs WHERE model = ? ORDER BY id DESC",
                        ("m-2",)).fetchall()
    conn.close()
    assert "request_logs_model (model=?)" in str(plan)  # a search of the column's index, no scan
