"""``GET /v1/logs/stream`` through the real gateway: records appear live from every worker, the ``/v1/logs``
filters and key rules apply, a backlog comes first, and a console that stops reading or a stopping gateway never
holds anything up."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import tempfile
import threading
import time
import uuid

import msgspec
import pytest

from tests.support.controlplane import api, create_key
from tests.support.http import post, request
from tests.support.inprocess import start_in_process
from tests.support.keys import add_key
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY, start_gateway
from tests.support.sse import EventStream

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
MEMBER_A, MEMBER_B = "member-key-team-a", "member-key-team-b"


def chat_headers(base: str, trace: str, key: str = ADMIN_KEY) -> dict[str, str]:
    return {"x-gateway-api-key": key, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
            "authorization": "Bearer sk-test", "content-type": "application/json", "x-gateway-trace-id": trace}


def stream(gateway, query: str = "", key: str | None = ADMIN_KEY) -> EventStream:
    headers = {"x-gateway-api-key": key} if key else {}
    return EventStream(f"{gateway.url}/v1/logs/stream{query}", headers)


def trace_id() -> str:
    return f"trace-{uuid.uuid4().hex}"


def test_a_request_made_by_the_sdk_appears_live_as_its_logs_item(gateway, openai_client):
    trace = trace_id()
    live = stream(gateway, f"?trace_id={trace}")
    try:
        assert live.status == 200
        assert live.headers["content-type"].startswith("text/event-stream")
        assert live.headers["cache-control"] == "no-cache"
        client = openai_client(**{"x-gateway-trace-id": trace})
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        (item,) = live.logs(1, timeout=5)
    finally:
        live.close()
    listed = request("GET", f"{gateway.url}/v1/logs?trace_id={trace}", headers={"x-gateway-api-key": ADMIN_KEY})
    assert listed.json()["data"] == [item]
    assert item["status"] == 200 and item["model"] == "gpt-4o-mini" and item["provider"] == "vendorA"


def test_filters_match_those_of_v1_logs(gateway, mock):
    trace = trace_id()
    ok, failing = mock.scenario(), mock.scenario([{"status": 503}, {"status": 429}])
    streams = {name: stream(gateway, f"?trace_id={trace}{query}") for name, query in {
        "all": "", "5xx": "&status=5xx", "429": "&status=429", "2xx": "&status=2xx", "model": "&model=gpt-4o-mini",
        "other model": "&model=other", "provider": "&provider=vendorA", "other provider": "&provider=anthropic",
    }.items()}
    try:
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(ok, trace)).status == 200
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(failing, trace)).status == 503
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(failing, trace)).status == 429
        got = {name: [i["status"] for i in live.logs(3 if name in ("all", "model", "provider") else 1, timeout=5)]
               for name, live in streams.items() if "other" not in name}
        quiet = {name: live.logs(1, timeout=1.5) for name, live in streams.items() if "other" in name}
    finally:
        for live in streams.values():
            live.close()
    assert got == {"all": [200, 503, 429], "5xx": [503], "429": [429], "2xx": [200], "model": [200, 503, 429],
                   "provider": [200, 503, 429]}
    assert quiet == {"other model": [], "other provider": []}


def test_a_time_range_lets_through_only_the_records_inside_it(gateway, mock):
    trace = trace_id()
    now = time.time()
    streams = {name: stream(gateway, f"?trace_id={trace}{query}") for name, query in {
        "open": f"&from={now - 60:.3f}&to={now + 3600:.3f}",
        "iso": f"&from={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now - 60))}",
        "ended": f"&to={now - 60:.3f}",
        "not yet": f"&from={now + 3600:.3f}",
    }.items()}
    try:
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(mock.scenario(), trace)).status == 200
        inside = {name: [i["trace_id"] for i in streams[name].logs(1, timeout=5)] for name in ("open", "iso")}
        outside = {name: streams[name].logs(1, timeout=1.5) for name in ("ended", "not yet")}
    finally:
        for live in streams.values():
            live.close()
    assert inside == {"open": [trace], "iso": [trace]}
    assert outside == {"ended": [], "not yet": []}


def test_the_backlog_comes_first_oldest_first_then_live_records(gateway, mock):
    trace = trace_id()
    base = mock.scenario()
    for _ in range(3):
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
    newest_first = [item["id"] for item in wait_logs(gateway, trace, 3)]
    live = stream(gateway, f"?trace_id={trace}&backlog=2")
    try:
        backlog = live.logs(2, timeout=5)
        assert [item["id"] for item in backlog] == newest_first[:2][::-1]
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
        (fresh,) = live.logs(1, timeout=5)
        assert int(fresh["id"]) > int(newest_first[0])
        assert live.logs(1, timeout=1.0) == []  # nothing twice
    finally:
        live.close()


@pytest.mark.parametrize("query, param", [
    ("status=abc", "status"), ("status=6xx", "status"), ("backlog=101", "backlog"), ("backlog=x", "backlog"),
    ("limit=5", "limit"), ("after=3", "after"), ("from=soon", "from"), ("model=", "model"), ("workspace=", "workspace"),
    ("window=1h", "window"), ("stauts=500", "stauts"), ("provider=not-a-provider", "provider"),
])
def test_bad_parameters_are_400_naming_them(gateway, query, param):
    resp = request("GET", f"{gateway.url}/v1/logs/stream?{query}", headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 400
    assert resp.json()["error"]["param"] == param


@pytest.fixture(scope="module")
def team_gateway(mock_server):
    data_dir = tempfile.mkdtemp(prefix="gw-teams-")
    add_key(data_dir, MEMBER_A, "team-a")
    add_key(data_dir, MEMBER_B, "team-b")
    server = start_in_process(data_dir=data_dir)
    yield server
    server.stop()


def test_keys_read_the_workspaces_they_may_read(team_gateway, mock):
    trace = trace_id()
    base = mock.scenario()
    assert stream(team_gateway, key=None).status == 401
    assert stream(team_gateway, key="not-a-key").status == 401
    assert request("GET", f"{team_gateway.url}/v1/logs/stream?workspace=team-b",
                   headers={"x-gateway-api-key": MEMBER_A}).status == 403
    views = {"a": stream(team_gateway, f"?trace_id={trace}", MEMBER_A),
             "b": stream(team_gateway, f"?trace_id={trace}", MEMBER_B),
             "admin": stream(team_gateway, f"?trace_id={trace}"),
             "admin on b": stream(team_gateway, f"?trace_id={trace}&workspace=team-b"),
             "a naming itself": stream(team_gateway, f"?trace_id={trace}&workspace=team-a", MEMBER_A)}
    try:
        for key in (MEMBER_A, MEMBER_B, MEMBER_B):
            assert post(f"{team_gateway.url}/v1/chat/completions", CHAT, chat_headers(base, trace, key)).status == 200
        seen = {name: sorted(i["workspace"] for i in live.logs(3 if name == "admin" else 2 if "b" in name else 1))
                for name, live in views.items()}
        extra = {name: live.logs(1, timeout=1.0) for name, live in views.items() if name != "admin"}
    finally:
        for live in views.values():
            live.close()
    assert seen == {"a": ["team-a"], "b": ["team-b", "team-b"], "admin": ["team-a", "team-b", "team-b"],
                    "admin on b": ["team-b", "team-b"], "a naming itself": ["team-a"]}
    assert all(items == [] for items in extra.values())
    listed = f"{team_gateway.url}/v1/logs?trace_id={trace}"
    mine = request("GET", listed, headers={"x-gateway-api-key": MEMBER_A}).json()["data"]
    assert [i["workspace"] for i in mine] == ["team-a"]  # the same rule on /v1/logs
    assert len(request("GET", listed, headers={"x-gateway-api-key": ADMIN_KEY}).json()["data"]) == 3


def test_a_revoked_key_s_stream_ends_and_gets_no_more_records(gateway, mock):
    trace = trace_id()
    base = mock.scenario()
    member = create_key(gateway, "member", scopes=["inference", "logs.read"])
    writer = create_key(gateway, "member", member["workspace_id"])
    live = stream(gateway, f"?trace_id={trace}", member["key"])
    try:
        assert live.status == 200
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(base, trace, member["key"])).status == 200
        assert [i["trace_id"] for i in live.logs(1, timeout=5)] == [trace]
        revoked = api(gateway, "DELETE", f"/v1/api-keys/{member['id']}?workspace_id={member['workspace_id']}")
        assert revoked.status == 200, revoked.text
        # its workspace goes on making records, which no longer reach the revoked key
        assert post(f"{gateway.url}/v1/chat/completions", CHAT, chat_headers(base, trace, writer["key"])).status == 200
        assert live.logs(1, timeout=5) == []
        deadline = time.monotonic() + 20  # the stream ends by the next heartbeat at the latest
        while not live.ended and time.monotonic() < deadline:
            live.read_event(0.5)
        assert live.ended
    finally:
        live.close()
    assert stream(gateway, "", member["key"]).status == 401


def test_records_from_every_worker_appear(mock_server, mock):
    server = start_gateway(workers=2)
    trace = trace_id()
    base = mock.scenario()
    try:
        live = stream(server, f"?trace_id={trace}")
        try:
            for _ in range(20):  # a new connection each: the workers share the listening socket
                assert post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
            items = live.logs(20, timeout=10)
        finally:
            live.close()
    finally:
        server.stop()
    assert len(items) == 20 and len({item["id"] for item in items}) == 20


def _worker_rss_mb(pid: int) -> float:
    children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    return max(int(line.split()[1]) / 1024 for child in children for line in open(f"/proc/{child}/status")
               if line.startswith("VmRSS"))


@pytest.mark.serial  # a load test: its throughput and latency bounds need the machine to itself
def test_a_console_that_stops_reading_is_dropped_and_holds_nothing(mock_server, mock):
    data_dir = tempfile.mkdtemp(prefix="gw-slow-console-")
    server = start_gateway({"GATEWAY_LOG_FILE": "off"}, data_dir=data_dir)
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(f"GET /v1/logs/stream HTTP/1.1\r\nHost: x\r\nx-gateway-api-key: {ADMIN_KEY}\r\n\r\n".encode())
        time.sleep(0.5)
        rss_before = _worker_rss_mb(server.proc.pid)
        db = sqlite3.connect(os.path.join(data_dir, "logs.db"), isolation_level=None)
        doc = msgspec.json.encode({"trace_id": "flood", "status": 200, "pad": "x" * 8000})
        base = mock.scenario()
        answered = []
        flood_until = time.monotonic() + 20  # about 30 MB of records for a reader that never reads
        while time.monotonic() < flood_until:
            db.executemany("INSERT INTO request_logs (ts, workspace, trace_id, status, provider, doc)"
                           " VALUES (?, 'default', 'flood', 200, 'vendorA', ?)", [(time.time(), doc)] * 20)
            started = time.monotonic()
            assert post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, trace_id())).status == 200
            answered.append(time.monotonic() - started)
            time.sleep(0.02)
        db.close()
        rss_after = _worker_rss_mb(server.proc.pid)
        sock.settimeout(10)
        closed = False
        try:  # what the kernel still holds, then the end the server gave it
            while sock.recv(1 << 20):
                pass
            closed = True
        except TimeoutError:
            pass
        sock.close()
    finally:
        server.stop()
    assert closed, "the gateway kept a console that stopped reading"
    assert rss_after - rss_before < 40, (rss_before, rss_after)
    assert max(answered) < 5.0  # requests were never held up by the stuck console


def test_open_streams_end_when_the_gateway_stops_so_shutdown_is_not_held(mock_server):
    server = start_gateway({"GATEWAY_SHUTDOWN_GRACE_S": "30"})
    live = stream(server)
    ended = {}

    def read() -> None:
        while not live.ended:
            live.read_event(1.0)
        ended["at"] = time.monotonic()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(25)
    took = time.monotonic() - started
    reader.join(5)
    live.close()
    assert "at" in ended, "the stream did not end"
    # the server kills a worker only after its 30 s kill timeout: ending well before it is the graceful stop.
    # (Its "Killing worker-1" log line is not a sign: Granian joins each worker from two threads, and when its
    # watcher thread reaps the exited worker first, the main thread sees it "alive" for a moment on a busy box.)
    assert took < 15, f"shutdown took {took:.1f}s: the open stream held it"


def _load(url: str, headers: dict[str, str], total: int, threads: int = 8) -> tuple[float, int]:
    """``total`` chat requests over ``threads`` keep-alive connections: (requests per second, non-200 answers)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    body = msgspec.json.encode(CHAT)
    failures = []

    def worker(count: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            for _ in range(count):
                conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    failures.append(resp.status)
        finally:
            conn.close()

    pool = [threading.Thread(target=worker, args=(total // threads,)) for _ in range(threads)]
    started = time.monotonic()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(120)
    return total / (time.monotonic() - started), len(failures)


@pytest.mark.serial  # a load test: its throughput and latency bounds need the machine to itself
def test_a_hundred_consoles_watching_a_load_cost_it_little(mock_server, mock):
    import json
    import subprocess
    import sys
    from pathlib import Path

    server = start_gateway()
    base = mock.scenario()
    headers = chat_headers(base, trace_id())
    del headers["x-gateway-trace-id"]
    try:
        _load(server.url, headers, 400)  # warm: pools, caches, the first log writes
        without, failed_without = [], 0
        with_consoles, failed_with = [], 0
        summary = {}
        for _ in range(2):
            rps, failed = _load(server.url, headers, 1600)
            without.append(rps)
            failed_without += failed
            readers = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve().parents[2] / "bench" / "consoles.py"), "--url",
                 server.url, "--key", ADMIN_KEY, "--count", "100", "--seconds", "120"],
                stdout=subprocess.PIPE, text=True)
            time.sleep(1.5)
            rps, failed = _load(server.url, headers, 1600)
            with_consoles.append(rps)
            failed_with += failed
            time.sleep(1.0)  # the last records reach the consoles
            readers.send_signal(signal.SIGTERM)
            summary = json.loads(readers.communicate(timeout=30)[0])
            assert summary["ok"] == 100 and summary["closed_by_server"] == 0, summary
            assert summary["events"] >= 100, summary  # every console got records
        rss = _worker_rss_mb(server.proc.pid)
    finally:
        server.stop()
    assert failed_without == 0 and failed_with == 0
    ratio = max(with_consoles) / max(without)
    print(f"\n100 consoles: {max(without):.0f} req/s without, {max(with_consoles):.0f} with (ratio {ratio:.2f}); "
          f"consoles got {summary['events']} records, {summary['bytes']} bytes; worker RSS {rss:.1f} MB")
    assert ratio > 0.5  # generous: the benchmark (bench/overhead.py --consoles 100) holds the real budget
    assert rss < 120
