"""Gateway keys at the edge: odd bytes are a 401 everywhere, and looking keys up never stalls the event loop."""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest

from tests.support.http import _conn, post, request
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("key", [b"\xff\xfe-not-ascii", "clé-é".encode(), ADMIN_KEY.encode() + b"\xe9"])
@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("POST", "/v1/embeddings"),
    ("GET", "/v1/logs"), ("GET", "/metrics"),
])
def test_a_key_with_non_ascii_bytes_is_a_401_on_every_route(gateway, mock, key, method, path):
    headers = {"x-gateway-api-key": key, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
               "x-gateway-custom-host": mock.url + "/v1", "content-type": "application/json"}
    resp = request(method, gateway.url + path, CHAT if method == "POST" else None, headers)
    assert resp.status == 401, resp.text
    assert resp.json()["error"]["param"] == "x-gateway-api-key"


def test_a_non_ascii_bearer_on_metrics_is_a_401(gateway):
    resp = request("GET", f"{gateway.url}/metrics", headers={"authorization": b"Bearer \xc3\xa9\xff"})
    assert resp.status == 401


def _hold_key_table(path: Path) -> sqlite3.Connection:
    """A writer that holds the key table the way a long control-plane write does: readers get 'locked'."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS gateway_keys (hash TEXT PRIMARY KEY, workspace TEXT NOT NULL,"
                 " role TEXT NOT NULL, created_at REAL NOT NULL)")
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO gateway_keys VALUES ('held', 'default', 'member', 0)")
    return conn


def test_random_keys_do_not_delay_a_relayed_stream_while_a_writer_holds_the_key_table(mock, tmp_path):
    """2,000 unknown keys (each a key-table lookup) arrive while a stream is relayed and a writer holds the table.
    The stream's chunks, 40 ms apart upstream, reach the client without extra gaps (a lookup on the event loop
    would stall them for SQLite's busy timeout); the unknown keys answer 401 or, while the table is held, 503."""
    data = tmp_path / "data"
    data.mkdir()
    writer = _hold_key_table(data / "gateway.db")
    server = start_gateway(data_dir=str(data))
    try:
        base = mock.scenario([{"chunks": 100, "chunk_delay_ms": 40}])  # 4 s: longer than the 2,000 requests
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
                   "x-gateway-custom-host": base + "/v1", "content-type": "application/json"}
        arrivals: list[float] = []
        started = threading.Event()

        def relay() -> None:
            conn, path = _conn(f"{server.url}/v1/chat/completions", 60)
            conn.request("POST", path, body=msgspec.json.encode({**CHAT, "stream": True}), headers=headers)
            resp = conn.getresponse()
            assert resp.status == 200
            for line in resp:
                if line.startswith(b"data: "):
                    arrivals.append(time.perf_counter())
                    started.set()
            conn.close()

        streamer = threading.Thread(target=relay)
        streamer.start()
        assert started.wait(10)
        statuses: dict[int, int] = {}
        lock = threading.Lock()

        def unknown_key(_: int) -> None:
            resp = post(f"{server.url}/v1/chat/completions", CHAT,
                        {**headers, "x-gateway-api-key": "gk-" + secrets.token_hex(12)}, timeout=30)
            with lock:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(unknown_key, range(2000)))
        load_ended = time.perf_counter()
        streamer.join(30)
        assert not streamer.is_alive()
        assert sum(statuses.values()) == 2000
        assert set(statuses) <= {401, 503}, statuses
        assert load_ended < arrivals[-1], "the stream ended before the lookups did: it must span them"
        gaps = [b - a for a, b in zip(arrivals[1:], arrivals[2:])]  # from the first content chunk on
        assert len(arrivals) >= 100
        # 40 ms upstream cadence; a lookup on the loop would hold a chunk back by SQLite's busy timeout (seconds)
        assert max(gaps) < 0.040 + 0.25, f"largest gap between chunks {max(gaps) * 1000:.0f} ms"
        writer.execute("COMMIT")
        writer.close()
        time.sleep(1.2)  # the busy back-off ends
        assert post(f"{server.url}/v1/chat/completions", CHAT,
                    {**headers, "x-gateway-api-key": "gk-" + secrets.token_hex(12)}).status == 401
        assert post(f"{server.url}/v1/chat/completions", CHAT, headers).status == 200
    finally:
        server.stop()
        try:
            writer.close()
        except sqlite3.Error:
            pass


def test_a_stored_key_is_found_and_an_unknown_one_refused(mock, tmp_path):
    from gateway.controlplane.keys import key_hash

    data = tmp_path / "data"
    data.mkdir()
    conn = sqlite3.connect(data / "gateway.db", isolation_level=None)
    conn.execute("CREATE TABLE gateway_keys (hash TEXT PRIMARY KEY, workspace TEXT NOT NULL, role TEXT NOT NULL,"
                 " created_at REAL NOT NULL)")
    conn.execute("INSERT INTO gateway_keys VALUES (?, 'team-a', 'member', 0)", (key_hash("gk-team-a-key"),))
    conn.close()
    server = start_gateway(data_dir=str(data))
    try:
        headers = {"x-gateway-provider": "vendorA", "authorization": "Bearer sk", "content-type": "application/json",
                   "x-gateway-custom-host": mock.scenario() + "/v1"}
        for _ in range(3):  # the database the first time, memory after
            assert post(f"{server.url}/v1/chat/completions", CHAT,
                        {**headers, "x-gateway-api-key": "gk-team-a-key"}).status == 200
        assert post(f"{server.url}/v1/chat/completions", CHAT,
                    {**headers, "x-gateway-api-key": "gk-team-b-key"}).status == 401
        resp = request("GET", f"{server.url}/metrics", headers={"x-gateway-api-key": "gk-team-a-key"})
        assert resp.status == 403  # a member key is known, but /metrics wants an admin key
    finally:
        server.stop()
