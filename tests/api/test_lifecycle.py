"""Process behaviour a user notices: disconnects cancel upstream streams, SIGTERM drains, keys, readiness."""

from __future__ import annotations

import signal
import threading
import time

from tests.support.http import _conn, post, request
from tests.support.servers import ADMIN_KEY, start, start_gateway

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_client_leaving_mid_stream_cancels_the_upstream_request(served_gateway, mock, gw_headers):
    import msgspec

    base = mock.scenario([{"chunks": 40, "chunk_delay_ms": 100}])
    conn, path = _conn(f"{served_gateway.url}/v1/chat/completions", 30)
    conn.request("POST", path, body=msgspec.json.encode({**CHAT, "stream": True}), headers=gw_headers(base + "/v1"))
    resp = conn.getresponse()
    assert resp.status == 200
    resp.readline()  # first event arrived
    conn.sock.close()
    conn.close()
    deadline = time.monotonic() + 3
    entry = None
    while time.monotonic() < deadline:
        entry = mock.calls(base)["requests"][0]
        if entry["aborted"]:
            break
        time.sleep(0.1)
    assert entry is not None and entry["aborted"] and not entry["completed"]


def test_sigterm_lets_in_flight_requests_finish(mock):
    server = start_gateway()
    base = mock.scenario([{"delay_ms": 1500}])
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
               "x-gateway-custom-host": base + "/v1", "authorization": "Bearer sk"}
    result: dict = {}

    def call() -> None:
        result["resp"] = post(f"{server.url}/v1/chat/completions", CHAT, headers, timeout=30)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)
    worker.join(30)
    assert result["resp"].status == 200
    server.proc.wait(20)
    assert server.proc.returncode is not None


def test_first_start_without_admin_key_generates_one_and_prints_it_once(tmp_path):
    env = {"GATEWAY_DATA_DIR": str(tmp_path)}
    first = start(["serve"], env)
    try:
        deadline = time.monotonic() + 10
        while "generated admin key" not in first.output() and time.monotonic() < deadline:
            time.sleep(0.1)
        line = next(text for text in first.output().splitlines() if "generated admin key" in text)
        key = line.rsplit(" ", 1)[1]
        ok = request("GET", f"{first.url}/v1/nothing", headers={"x-gateway-api-key": key})
        assert ok.status == 404  # authenticated route lookup, not 401
        denied = post(f"{first.url}/v1/chat/completions", CHAT, {"x-gateway-api-key": "nope"})
        assert denied.status == 401
        assert post(f"{first.url}/v1/chat/completions", CHAT, {"x-gateway-api-key": key}).status == 400
    finally:
        first.stop()
    second = start(["serve"], env)
    try:
        time.sleep(0.5)
        assert "generated admin key" not in second.output()
        assert post(f"{second.url}/v1/chat/completions", CHAT, {"x-gateway-api-key": key}).status == 400
    finally:
        second.stop()


def test_ready_is_200_while_serving(gateway):
    assert request("GET", f"{gateway.url}/ready").status == 200
