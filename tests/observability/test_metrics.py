"""``GET /metrics`` through the real gateway: who may read it, and what requests leave in it (across workers)."""

from __future__ import annotations

import concurrent.futures
import time
import uuid

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.http import post, request, stream_events
from tests.support.inprocess import start_in_process
from tests.support.servers import ADMIN_KEY, start_gateway


def scrape(gateway, **headers: str):
    return request("GET", f"{gateway.url}/metrics", headers=headers or {"x-gateway-api-key": ADMIN_KEY})


def total(text: str, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    out = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                out += sample.value
    return out


def wait_metric(gateway, name: str, expected: float, timeout: float = 8.0, **labels: str) -> str:
    """Scrape until the metric reaches ``expected`` (workers flush their sums about once a second)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = scrape(gateway).text
        if total(text, name, **labels) >= expected:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{name}{labels} did not reach {expected}; last value {total(text, name, **labels)}")


def chat(gateway, base: str, model: str, **extra: str):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
               "authorization": "Bearer sk-test", "content-type": "application/json", **extra}
    return post(f"{gateway.url}/v1/chat/completions",
                {"model": model, "messages": [{"role": "user", "content": "hi"}]}, headers)


def test_metrics_need_the_admin_key_in_either_header(gateway):
    missing = scrape(gateway, accept="text/plain")
    assert missing.status == 401
    assert missing.json()["error"]["param"] == "x-gateway-api-key"
    assert scrape(gateway, **{"x-gateway-api-key": "not-a-key"}).status == 401
    assert scrape(gateway, authorization="Bearer not-a-key").status == 401
    by_header = scrape(gateway, **{"x-gateway-api-key": ADMIN_KEY})
    assert by_header.status == 200
    assert by_header.headers["content-type"].startswith("text/plain")
    assert "# TYPE gateway_trace_spans_exported_total counter" in by_header.text
    assert scrape(gateway, authorization=f"Bearer {ADMIN_KEY}").status == 200


def test_metrics_are_public_when_configured(mock):
    server = start_in_process({"GATEWAY_METRICS_PUBLIC": "1"})
    try:
        assert chat(server, mock.scenario(), "public-model").status == 200
        deadline = time.monotonic() + 8
        while True:
            resp = request("GET", f"{server.url}/metrics")
            assert resp.status == 200
            if total(resp.text, "gateway_requests_total", model="public-model") == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert total(resp.text, "gateway_requests_total", model="public-model") == 1
        assert "# TYPE gateway_request_duration_seconds histogram" in resp.text
    finally:
        server.stop()


def test_requests_are_counted_by_endpoint_provider_model_status_and_cache(gateway, mock):
    model = f"metrics-{uuid.uuid4().hex[:8]}"
    ok, failing = mock.scenario(), mock.scenario([{"status": 500, "message": "boom"}])
    for _ in range(3):
        assert chat(gateway, ok, model).status == 200
    assert chat(gateway, failing, model).status == 500
    text = wait_metric(gateway, "gateway_requests_total", 3, model=model, status="200")
    text = wait_metric(gateway, "gateway_requests_total", 1, model=model, status="500")
    labels = {"endpoint": "chat", "provider": "vendorA", "model": model, "cache_status": "DISABLED"}
    assert total(text, "gateway_requests_total", status="200", **labels) == 3
    assert total(text, "gateway_requests_total", status="500", **labels) == 1
    # tokens by kind, from the mock's usage
    assert total(text, "gateway_tokens_total", model=model, kind="input") >= 3
    assert total(text, "gateway_tokens_total", model=model, kind="output") >= 3
    # histograms: total, upstream and added time, with buckets, sums and counts
    for name in ("gateway_request_duration_seconds", "gateway_upstream_duration_seconds"):
        assert total(text, f"{name}_count", endpoint="chat", provider="vendorA") >= 3
        assert total(text, f"{name}_bucket", endpoint="chat", provider="vendorA", le="+Inf") >= 3
        assert total(text, f"{name}_sum", endpoint="chat", provider="vendorA") > 0
    assert total(text, "gateway_added_latency_seconds_count", endpoint="chat") >= 3


def test_streams_record_time_to_first_token(gateway, mock):
    before = total(scrape(gateway).text, "gateway_time_to_first_token_seconds_count", endpoint="chat")
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
               "x-gateway-custom-host": mock.scenario() + "/v1", "authorization": "Bearer sk-test",
               "content-type": "application/json"}
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions",
                                      {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                       "stream": True}, headers)
    assert status == 200 and list(events)[-1] == b"[DONE]"
    wait_metric(gateway, "gateway_time_to_first_token_seconds_count", before + 1, endpoint="chat")


def test_retries_and_fallbacks_are_counted(gateway, mock):
    text = scrape(gateway).text
    retries_before = total(text, "gateway_retries_total", endpoint="chat", provider="vendorA")
    fallbacks_before = total(text, "gateway_fallbacks_total", endpoint="chat")
    flaky, bad, good = mock.scenario([{"status": 503}, {}]), mock.scenario([{"status": 503}]), mock.scenario()
    target = {"provider": "vendorA", "api_key": "sk-t"}
    config = {"strategy": {"mode": "fallback"}, "targets": [
        {**target, "custom_host": bad + "/v1"},
        {**target, "custom_host": flaky + "/v1", "retry": {"attempts": 2}},
    ]}
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
               "content-type": "application/json"}
    resp = post(f"{gateway.url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]},
                headers)
    assert resp.status == 200 and resp.headers["x-gateway-retry-attempt-count"] == "1"
    assert mock.calls(good)["calls"] == 0
    wait_metric(gateway, "gateway_retries_total", retries_before + 1, endpoint="chat", provider="vendorA")
    wait_metric(gateway, "gateway_fallbacks_total", fallbacks_before + 1, endpoint="chat")


@pytest.fixture(scope="module")
def two_workers(mock_server):
    server = start_gateway(workers=2)
    yield server
    server.stop()


def test_counts_add_up_across_workers(two_workers, mock):
    model = f"workers-{uuid.uuid4().hex[:8]}"
    base = mock.scenario([{"delay_ms": 50}])
    n = 24
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: chat(two_workers, base, model).status, range(n)))
    assert statuses == [200] * n
    wait_metric(two_workers, "gateway_requests_total", n, model=model)
    # every scrape, whichever worker answers it, shows the sum of all workers
    for _ in range(6):
        assert total(scrape(two_workers).text, "gateway_requests_total", model=model) == n
        assert total(scrape(two_workers).text, "gateway_request_duration_seconds_count", endpoint="chat") >= n


def test_each_worker_reports_its_event_loop_lag(two_workers):
    def workers(text: str) -> dict[str, float]:
        counts: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "gateway_event_loop_lag_seconds_count":
                    counts[sample.labels["worker"]] = sample.value
        return counts

    deadline = time.monotonic() + 10
    seen: dict[str, float] = {}
    while time.monotonic() < deadline and (len(seen) < 2 or min(seen.values()) < 2):
        seen = workers(scrape(two_workers).text)
        time.sleep(0.3)
    assert len(seen) == 2 and min(seen.values()) >= 2, seen  # a timer every half second on each worker
    text = scrape(two_workers).text
    assert "# TYPE gateway_event_loop_lag_seconds histogram" in text
    # an idle loop fires on time: nearly every measurement is under 100 ms
    assert total(text, "gateway_event_loop_lag_seconds_bucket", le="0.1") >= 0.9 * sum(workers(text).values())
