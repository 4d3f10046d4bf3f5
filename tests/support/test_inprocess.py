"""The in-process client (tests/support/asgi.py, inprocess.py): lifespan once, answers with their status and headers,
streams read event by event, a client leaving mid-stream, and the raw HTTP helpers reaching a mounted gateway."""

from __future__ import annotations

from openai import OpenAI

from tests.support.asgi import served
from tests.support.headers import headers_for
from tests.support.http import post, request
from tests.support.inprocess import InProcessGateway, start_in_process
from tests.support.mounts import mounted
from tests.support.poll import wait_for, wait_logs
from tests.support.servers import ADMIN_KEY

STREAM = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_the_lifespan_starts_the_runtime_once_and_closes_it_on_exit():
    with InProcessGateway() as gw:
        runtime = gw.runtime
        assert runtime.ready
        assert mounted(gw.url + "/health") is gw
        assert request("GET", f"{gw.url}/ready").status == 200
        assert request("GET", f"{gw.url}/ready").status == 200
        assert gw.runtime is runtime
    assert not runtime.ready
    assert mounted(gw.url + "/health") is None


def test_an_answer_has_its_status_headers_and_error_envelope():
    gw = start_in_process()
    try:
        missing = request("GET", f"{gw.url}/v1/nowhere?x=1")
        assert missing.status == 404
        assert missing.headers["x-gateway-cache-status"] == "DISABLED"
        assert missing.json()["error"]["message"] == "no route for GET /v1/nowhere"
        refused = post(f"{gw.url}/v1/chat/completions", b"{", headers_for("http://127.0.0.1:9/v1"))
        assert refused.status == 400 and refused.json()["error"]["type"] == "invalid_request_error"
    finally:
        gw.stop()


def test_a_stream_is_read_event_by_event_as_the_upstream_sends_it(mock):
    base = mock.scenario([{"chunks": 30, "chunk_delay_ms": 200}])
    with InProcessGateway() as gw:
        stream = gw.events("POST", "/v1/chat/completions", STREAM, headers_for(base + "/v1"))
        try:
            assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
            first = stream.read_event(30)
            assert first is not None and '"role":"assistant"' in first[1]
            assert not stream.ended  # the upstream has 29 chunks and six seconds to go
        finally:
            stream.close()


def test_a_whole_stream_ends_with_done(mock):
    base = mock.scenario([{"chunks": 3}])
    with InProcessGateway() as gw:
        status, headers, events = gw.stream_events(f"{gw.url}/v1/chat/completions", STREAM, headers_for(base + "/v1"))
        payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]" and len(payloads) >= 4


def test_a_client_leaving_mid_stream_is_a_disconnect_the_gateway_logs_and_passes_upstream(mock):
    base = mock.scenario([{"chunks": 50, "chunk_delay_ms": 200}])
    with InProcessGateway() as gw:
        stream = gw.events("POST", "/v1/chat/completions", STREAM, headers_for(base + "/v1", trace_id="left-1"))
        assert stream.read_event(30) is not None
        stream.close()
        assert wait_for(lambda: mock.calls(base)["requests"][0]["aborted"], timeout=30)
        record = wait_logs(gw, "left-1", timeout=30)[0]
        assert record["status"] == 499 and record["error"] == "client disconnected"


async def test_the_async_client_serves_requests_and_streams(mock):
    base = mock.scenario([{"chunks": 2}])
    async with served() as client:
        health = await client.request("GET", "/health")
        assert health.status == 200 and health.json()["status"] == "ok"
        async with client.stream("POST", "/v1/chat/completions", STREAM, headers_for(base + "/v1")) as answer:
            assert answer.status == 200
            events = []
            while (event := await answer.next_event(30)) is not None:
                events.append(event[1])
        assert events[-1] == "[DONE]"
        keys = await client.request("GET", "/v1/api-keys", headers={"x-gateway-api-key": ADMIN_KEY})
        assert keys.status == 200


def test_an_sdk_reaches_the_gateway_through_its_http_client(mock):
    base = mock.scenario([{"chunks": 3}])
    with InProcessGateway() as gw:
        client = OpenAI(base_url=f"{gw.url}/v1", api_key="sk-test", max_retries=0, http_client=gw.http_client(),
                        default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                                         "x-gateway-custom-host": base + "/v1"})
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                     stream=True))
        assert len(chunks) >= 4 and chunks[0].choices[0].delta.role == "assistant"
