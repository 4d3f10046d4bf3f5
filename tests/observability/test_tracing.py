"""Trace export through the real gateway: spans reach a tiny OTLP/HTTP collector in the client's trace, a
collector that is down or hangs never holds requests up (nor one that answers without end), and an upstream's error
reaches a span cut and with the gateway's credentials masked."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import uuid

import msgspec
import pytest
from aiohttp import web

from gateway.observability.masking import hash_value
from gateway.upstream.error_text import CUT_MARK
from tests.observability.test_metrics import total
from tests.support.hostile import HostileUpstream, response
from tests.support.http import post, request
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for
from tests.support.servers import ADMIN_KEY, free_port, start_gateway

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Collector:
    """An OTLP/HTTP JSON receiver on a loopback port, in its own thread; ``hang`` makes it never answer."""

    def __init__(self, hang: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.hang = hang
        self.posts: list[tuple[str, str, dict]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    async def _receive(self, req: web.Request) -> web.Response:
        if self.hang:
            await asyncio.sleep(3600)
        self.posts.append((req.path, req.headers.get("content-type", ""), msgspec.json.decode(await req.read())))
        return web.json_response({})

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._receive)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
        self._ready.set()
        self._loop.run_forever()

    def spans(self) -> list[dict]:
        return [span for _, _, body in list(self.posts) for rs in body["resourceSpans"]
                for ss in rs["scopeSpans"] for span in ss["spans"]]

    def wait_spans(self, trace_id: str, count: int = 2, timeout: float = 8.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [s for s in self.spans() if s["traceId"] == trace_id]
            if len(found) >= count:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no spans for {trace_id}; got {self.spans()}")

    def stop(self) -> None:
        async def shutdown() -> None:
            await self._runner.cleanup()

        if self.hang:
            self._loop.call_soon_threadsafe(self._loop.stop)
        else:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def collector():
    c = Collector()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def traced_gateway(collector, mock_server):
    server = start_in_process({"GATEWAY_OTLP_ENDPOINT": collector.url})
    yield server
    server.stop()


def send(gateway, mock, **headers: str):
    all_headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                   "x-gateway-custom-host": mock.scenario() + "/v1", "authorization": "Bearer sk-trace-secret-42",
                   "content-type": "application/json", **headers}
    return post(f"{gateway.url}/v1/chat/completions", CHAT, all_headers, timeout=15)


def attrs(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_spans_join_the_clients_trace_from_gateway_headers(traced_gateway, collector, mock):
    trace_id, span_id, parent = uuid.uuid4().hex, "00f067aa0ba902b7", "b7ad6b7169203331"
    resp = send(traced_gateway, mock, **{"x-gateway-trace-id": trace_id, "x-gateway-span-id": span_id,
                                         "x-gateway-parent-span-id": parent, "x-gateway-span-name": "ask-model"})
    assert resp.status == 200
    spans = collector.wait_spans(trace_id)
    path, content_type, _ = collector.posts[0]
    assert path == "/v1/traces" and content_type.startswith("application/json")
    (server,) = [s for s in spans if s["spanId"] == span_id]
    assert server["parentSpanId"] == parent and server["name"] == "ask-model"
    assert int(server["endTimeUnixNano"]) > int(server["startTimeUnixNano"])
    assert attrs(server)["gateway.provider"] == "vendorA"
    assert attrs(server)["http.response.status_code"] == "200"
    (upstream,) = [s for s in spans if s.get("parentSpanId") == span_id]
    assert upstream["name"] == "upstream vendorA"
    assert int(server["startTimeUnixNano"]) <= int(upstream["startTimeUnixNano"])
    assert int(upstream["endTimeUnixNano"]) <= int(server["endTimeUnixNano"])
    assert "sk-trace-secret-42" not in msgspec.json.encode(spans).decode()


def test_a_failed_request_span_says_why_without_the_callers_secret(traced_gateway, collector, mock):
    """The span's status message is the error text with the clear secrets of the request's headers hidden, as in
    its log line; attribute values keep their OTLP types."""
    trace_id = uuid.uuid4().hex
    base = mock.scenario([{"status": 400, "message": "bad key sk-trace-secret-42 for this model"}])
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
               "authorization": "Bearer sk-trace-secret-42", "content-type": "application/json",
               "x-gateway-trace-id": trace_id}
    assert post(f"{traced_gateway.url}/v1/chat/completions", CHAT, headers, timeout=15).status == 400
    spans = collector.wait_spans(trace_id)
    (server,) = [s for s in spans if s["kind"] == 2]
    assert server["status"]["code"] == 2 and "bad key" in server["status"]["message"]
    assert "sk-trace-secret-42" not in msgspec.json.encode(spans).decode()
    values = {a["key"]: a["value"] for a in server["attributes"]}
    assert values["http.response.status_code"] == {"intValue": "400"}
    assert values["gateway.stream"] == {"boolValue": False} and values["gateway.retries"] == {"intValue": "0"}
    assert values["gateway.endpoint"] == {"stringValue": "chat"}


def test_an_upstream_error_in_a_span_is_cut_and_masks_the_key_the_gateway_sent(traced_gateway, collector):
    """An upstream that echoes the request (with the config's key) in a 2 MB error: the span's status message is
    the cut text, the key only as its hash."""
    key = "sk-span-config-echo-0123456789"

    def answer(head: bytes, body: bytes) -> bytes:
        text = head.decode("latin-1") + "e" * (2 * 1024 * 1024)
        return response(400, msgspec.json.encode({"error": {"message": text}}))

    trace_id = uuid.uuid4().hex
    with HostileUpstream(answer) as upstream:
        config = {"provider": "vendorA", "api_key": key, "custom_host": upstream.url + "/v1"}
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
                   "content-type": "application/json", "x-gateway-trace-id": trace_id}
        assert post(f"{traced_gateway.url}/v1/chat/completions", CHAT, headers, timeout=15).status == 400
    spans = msgspec.json.encode(collector.wait_spans(trace_id)).decode()
    assert key not in spans and hash_value(key) in spans and CUT_MARK in spans
    assert len(spans) < 64 * 1024


def test_a_collector_answering_without_end_is_read_no_further_than_a_bound(mock_server, mock):
    """The exporter reads a collector's answer only to reuse the connection: 10 MB of it are not read, the
    connection is dropped instead, and requests go on."""
    endless = response(200, b"{" + b" " * (10 * 1024 * 1024) + b"}")
    with HostileUpstream(lambda head, body: endless) as collector:
        server = start_in_process({"GATEWAY_OTLP_ENDPOINT": collector.url})
        try:
            assert send(server, mock).status == 200
            wait_for(lambda: collector.dropped >= 1)  # the export was answered, and its connection dropped
            assert send(server, mock).status == 200
        finally:
            server.stop()


def test_a_w3c_traceparent_gives_trace_and_parent(traced_gateway, collector, mock):
    trace_id, parent = uuid.uuid4().hex, "a3ce929d0e0e4736"
    resp = send(traced_gateway, mock, traceparent=f"00-{trace_id}-{parent}-01")
    assert resp.status == 200 and resp.headers["x-gateway-trace-id"] == trace_id
    spans = collector.wait_spans(trace_id)
    (server,) = [s for s in spans if s.get("parentSpanId") == parent]
    assert len(server["spanId"]) == 16
    assert any(s.get("parentSpanId") == server["spanId"] for s in spans)


def test_a_trace_id_that_is_not_hex_is_hashed_and_kept_as_an_attribute(traced_gateway, collector, mock):
    client_id = f"order-{uuid.uuid4().hex[:6]}"
    assert send(traced_gateway, mock, **{"x-gateway-trace-id": client_id}).status == 200
    derived = hashlib.sha256(client_id.encode()).hexdigest()[:32]
    spans = collector.wait_spans(derived)
    assert any(attrs(s).get("gateway.trace_id") == client_id for s in spans)


def test_requests_do_not_wait_for_a_collector_that_is_down(mock):
    server = start_gateway({"GATEWAY_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"})
    try:
        for _ in range(5):
            assert send(server, mock).status == 200
        deadline = time.monotonic() + 8
        dropped = 0.0
        while time.monotonic() < deadline and not dropped:
            text = request("GET", f"{server.url}/metrics", headers={"x-gateway-api-key": ADMIN_KEY}).text
            dropped = total(text, "gateway_trace_spans_dropped_total", reason="export_failed")
            time.sleep(0.2)
        assert dropped >= 5
    finally:
        server.stop()


def test_requests_do_not_wait_for_a_collector_that_hangs(mock):
    hanging = Collector(hang=True)
    server = start_gateway({"GATEWAY_OTLP_ENDPOINT": hanging.url})
    try:
        for _ in range(3):
            assert send(server, mock).status == 200
            time.sleep(0.6)  # let an export start and hang
        assert send(server, mock).status == 200
    finally:
        code = server.stop()
        hanging.stop()
    assert code == 0  # shut down on its own: the pending export is bounded, not waited for forever
