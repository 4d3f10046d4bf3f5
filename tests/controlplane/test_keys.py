"""Gateway keys across processes: revocation reaches every worker and instance within a second, records survive a
restart, ``gateway keys`` works on the store without a server, and ``gateway serve`` prints a generated key once."""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest

from gateway.controlplane.keys import (
    ADMIN_SCOPES,
    SCOPES_BEFORE_ADMIN_SCOPES,
    SCOPES_VERSION,
    ApiKeys,
    KeyRecord,
    Principal,
    held_scopes,
)
from tests.support.asgi import call, in_process
from tests.support.controlplane import CHAT, api, chat, create_key
from tests.support.http import _conn, post, request
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for
from tests.support.redis_servers import RedisProcess
from tests.support.servers import ADMIN_KEY, start_gateway

#: the documented promise is one second; this leaves room for a slow, busy test machine
REVOKE_WITHIN_S = 1.5
ROUNDS = 20


def all_answer(server, key: str, base: str, status: int, rounds: int = ROUNDS) -> bool:
    """``rounds`` requests, each on a fresh connection (so every worker takes some), all answer ``status``."""
    return all(chat(server, key, base).status == status for _ in range(rounds))


@pytest.mark.serial  # a time bound that a busy machine could break
def test_a_revoked_key_is_refused_within_a_second_on_every_worker(mock):
    server = start_gateway(workers=2)
    try:
        base = mock.scenario()
        member = create_key(server, "member")
        assert all_answer(server, member["key"], base, 200)  # both workers now hold it in their caches
        resp = api(server, "DELETE", f"/v1/api-keys/{member['id']}?workspace_id={member['workspace_id']}")
        assert resp.status == 200
        time.sleep(REVOKE_WITHIN_S)
        assert all_answer(server, member["key"], base, 401)
    finally:
        server.stop()


@pytest.mark.serial  # a time bound that a busy machine could break
def test_a_rotated_keys_old_secret_is_refused_within_a_second_on_every_worker(mock):
    server = start_gateway(workers=2)
    try:
        base = mock.scenario()
        member = create_key(server, "member")
        assert all_answer(server, member["key"], base, 200)  # both workers now hold the old secret
        resp = api(server, "POST", f"/v1/api-keys/{member['id']}/rotate?workspace_id={member['workspace_id']}", {})
        assert resp.status == 200
        time.sleep(REVOKE_WITHIN_S)
        assert all_answer(server, member["key"], base, 401)
        assert all_answer(server, resp.json()["key"], base, 200)
    finally:
        server.stop()


def test_two_instances_on_one_redis_agree_on_keys(mock, shared_redis):
    first, second = start_in_process(shared_redis), start_in_process(shared_redis)
    try:
        base = mock.scenario()
        member = create_key(first, "member")
        assert all_answer(second, member["key"], base, 200, 3)
        assert all_answer(first, member["key"], base, 200, 3)
        assert api(first, "DELETE", f"/v1/api-keys/{member['id']}?workspace_id={member['workspace_id']}").status == 200
        time.sleep(REVOKE_WITHIN_S)
        assert all_answer(second, member["key"], base, 401, 3)
        listed = api(second, "GET", f"/v1/api-keys?workspace_id={member['workspace_id']}").json()
        assert listed["total"] == 0
    finally:
        first.stop()
        second.stop()


def test_keys_survive_a_restart(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-keys-")
    server = start_in_process(data_dir=data_dir)
    try:
        member = create_key(server, "member", rotation_period="monthly")
    finally:
        server.stop()
    server = start_in_process(data_dir=data_dir)
    try:
        assert chat(server, member["key"], mock.scenario()).status == 200
        got = api(server, "GET", f"/v1/api-keys/{member['id']}?workspace_id={member['workspace_id']}").json()
        assert got["rotation_period"] == 30 and got["name"] == member["name"]
    finally:
        server.stop()


def gateway_cli(data_dir: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") or k == "GATEWAY_NO_EXTENSIONS"}
    environ.update({"GATEWAY_DATA_DIR": data_dir, **(env or {})})
    return subprocess.run([sys.executable, "-m", "gateway", *args], env=environ, capture_output=True, text=True,
                          timeout=60, cwd=str(Path(__file__).resolve().parents[2]))


@pytest.mark.serial  # a time bound that a busy machine could break
def test_the_keys_command_creates_lists_and_revokes_without_a_server(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-cli-")
    made = gateway_cli(data_dir, "keys", "create", "--name", "ci bot", "--role", "member", "--workspace", "team-a",
                       "--scopes", "inference,models.read", "--rotation-period", "weekly")
    assert made.returncode == 0, made.stderr
    record = msgspec.json.decode(made.stdout)
    assert record["workspace_id"] == "team-a" and record["scopes"] == ["inference", "models.read"]
    assert record["rotation_period"] == 7 and record["key"].startswith("gw-")
    listed = gateway_cli(data_dir, "keys", "list")
    assert listed.returncode == 0 and record["id"] in listed.stdout and "ci bot" in listed.stdout
    assert record["key"] not in listed.stdout
    server = start_in_process(data_dir=data_dir)
    try:
        base = mock.scenario()
        assert chat(server, record["key"], base).status == 200
        revoked = gateway_cli(data_dir, "keys", "revoke", record["id"], "--workspace", "team-a")
        assert revoked.returncode == 0, revoked.stderr
        # a running gateway hears of the CLI's change through the records watcher
        assert wait_for(lambda: chat(server, record["key"], base).status == 401, timeout=REVOKE_WITHIN_S + 1)
    finally:
        server.stop()
    bad = gateway_cli(data_dir, "keys", "create", "--name", "x", "--scopes", "everything")
    assert bad.returncode == 2 and "scopes[0]" in bad.stderr
    bad = gateway_cli(data_dir, "keys", "create", "--name", "x", "--workspace", "team:blue")
    assert bad.returncode == 2 and "(workspace_id)" in bad.stderr and "'team:blue'" in bad.stderr, bad.stderr


def test_serve_generates_an_admin_key_once_when_none_is_configured(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-boot-")
    server = start_gateway({"GATEWAY_ADMIN_KEY": ""}, data_dir=data_dir)
    try:
        assert wait_for(lambda: "generated admin key" in server.output())
        line = next(line for line in server.output().splitlines() if "generated admin key" in line)
        key = line.rsplit(" ", 1)[1]
        # the generated key is root: it may create keys in any workspace
        made = api(server, "POST", "/v1/api-keys", {"name": "n", "workspace_id": "elsewhere"}, key)
        assert made.status == 201, made.text
    finally:
        server.stop()
    server = start_gateway({"GATEWAY_ADMIN_KEY": ""}, data_dir=data_dir)
    try:
        time.sleep(0.5)
        assert "generated admin key" not in server.output()
        assert chat(server, key, mock.scenario()).status == 200
    finally:
        server.stop()


@pytest.mark.parametrize("role", ["admin", "member"])
def test_a_revoked_key_gets_401_on_admin_routes_too(gateway, role):
    key = create_key(gateway, role)
    assert api(gateway, "DELETE", f"/v1/api-keys/{key['id']}?workspace_id={key['workspace_id']}").status == 200
    resp = api(gateway, "GET", "/v1/models", key=key["key"])
    assert resp.status == 401


def test_the_keys_command_works_on_redis_too(mock, shared_redis):
    made = gateway_cli(tempfile.mkdtemp(prefix="gw-cli-"), "keys", "create", "--name", "on redis", env=shared_redis)
    assert made.returncode == 0, made.stderr
    record = msgspec.json.decode(made.stdout)
    server = start_in_process(shared_redis)
    try:
        assert chat(server, record["key"], mock.scenario()).status == 200
    finally:
        server.stop()


@pytest.mark.parametrize("key", [b"\xff\xfe-not-ascii", "clé-é".encode(), b"test-admin-key\xe9"])
@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/chat/completions"), ("POST", "/v1/embeddings"), ("GET", "/v1/logs"), ("GET", "/metrics"),
    ("GET", "/v1/api-keys"), ("GET", "/v1/models"), ("POST", "/v1/prompts/pp-x/render"),
])
def test_a_key_with_non_ascii_bytes_is_a_401_on_every_route(gateway, mock, key, method, path):
    headers = {"x-gateway-api-key": key, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
               "x-gateway-custom-host": mock.url + "/v1", "content-type": "application/json"}
    resp = request(method, gateway.url + path, CHAT if method == "POST" else None, headers)
    assert resp.status == 401, resp.text
    assert resp.json()["error"]["param"] == "x-gateway-api-key"


def _unknown_keys_during_a_stream(server, headers: dict[str, str], count: int) -> dict[int, int]:
    """Send ``count`` random gateway keys while a stream is relayed (its upstream sends a chunk every 40 ms, for 4 s:
    longer than the lookups); check the stream spanned them and its chunks came without extra gaps. The statuses
    the keys got, with their counts."""
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
                    {**headers, "x-gateway-api-key": "gw-" + secrets.token_hex(12)}, timeout=30)
        with lock:
            statuses[resp.status] = statuses.get(resp.status, 0) + 1

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(unknown_key, range(count)))
    load_ended = time.perf_counter()
    streamer.join(30)
    assert not streamer.is_alive()
    assert load_ended < arrivals[-1], "the stream ended before the lookups did: it must span them"
    gaps = [b - a for a, b in zip(arrivals[1:], arrivals[2:])]
    assert len(arrivals) >= 100
    # A 40 ms upstream cadence. Lookups that held the event loop would hold the chunks back by a lock or store wait
    # (up to 500 ms) again and again: many long gaps. A busy 2-core box may stall this client's reader once or twice
    # (its 16 sending threads share one GIL with it), so a stall or two is allowed, no more and none of a second.
    long_gaps = sorted(gap for gap in gaps if gap >= 0.040 + 0.25)
    assert len(long_gaps) <= 2 and max(gaps) < 1.0, (
        f"gaps between chunks over 290 ms: {[round(gap * 1000) for gap in long_gaps]} ms")
    return statuses


def test_unknown_keys_do_not_delay_a_relayed_stream_while_a_writer_holds_the_key_table(mock, tmp_path):
    """The embedded store: 2,000 unknown keys (each a read of the key records) while another process holds a write
    transaction on the state file. Each answers 401; the stream's chunks are not held back."""
    server = start_gateway(data_dir=str(tmp_path))
    writer = None
    try:
        base = mock.scenario([{"chunks": 100, "chunk_delay_ms": 40}])
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
                   "x-gateway-custom-host": base + "/v1", "content-type": "application/json"}
        assert post(f"{server.url}/v1/chat/completions", CHAT, headers).status == 200
        writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None, timeout=5)
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("DELETE FROM records WHERE 0")  # a write in the table the keys live in
        statuses = _unknown_keys_during_a_stream(server, headers, 2000)
        assert statuses == {401: 2000}, statuses
        writer.execute("ROLLBACK")
        assert post(f"{server.url}/v1/chat/completions", CHAT, headers).status == 200
    finally:
        if writer is not None:
            writer.close()
        server.stop()


def test_unknown_keys_do_not_delay_a_relayed_stream_while_the_store_hangs(mock):
    """1,000 unknown keys (each a store read) arrive while a stream is relayed and the store (Redis) hangs. The
    stream's chunks, 40 ms apart upstream, reach the client without extra gaps; the unknown keys answer 401 or,
    while the store hangs, 503; the admin key keeps working from memory; afterwards all is as before."""
    redis = RedisProcess().start()
    server = start_gateway({"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_TIMEOUT_MS": "300"})
    hung = False
    try:
        base = mock.scenario([{"chunks": 100, "chunk_delay_ms": 40}])  # 4 s: longer than the lookups
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
                   "x-gateway-custom-host": base + "/v1", "content-type": "application/json"}
        assert post(f"{server.url}/v1/chat/completions", CHAT, headers).status == 200
        redis.proc.send_signal(signal.SIGSTOP)  # it keeps its connections and answers nothing
        hung = True
        statuses = _unknown_keys_during_a_stream(server, headers, 1000)
        assert set(statuses) <= {401, 503} and 503 in statuses, statuses
        redis.proc.send_signal(signal.SIGCONT)
        hung = False
        assert wait_for(lambda: request("GET", server.url + "/health").json()["state"]["healthy"], timeout=10)
        time.sleep(1.2)  # the back-off ends
        assert post(f"{server.url}/v1/chat/completions", CHAT,
                    {**headers, "x-gateway-api-key": "gw-" + secrets.token_hex(12)}).status == 401
        assert post(f"{server.url}/v1/chat/completions", CHAT, headers).status == 200
        member = create_key(server, "member")
        assert chat(server, member["key"], mock.scenario()).status == 200
    finally:
        if hung:
            redis.proc.send_signal(signal.SIGCONT)
        server.stop()
        redis.stop()


def test_an_admin_key_stored_before_the_admin_scopes_holds_them_only_when_it_held_every_scope_then():
    old_defaults = sorted(SCOPES_BEFORE_ADMIN_SCOPES)
    # every scope since: the admin scopes, and the MCP ones a version-1 key holding everything gained after them
    assert held_scopes("admin", old_defaults, 0) == SCOPES_BEFORE_ADMIN_SCOPES | set(ADMIN_SCOPES) | {"mcp.invoke"}
    assert held_scopes("admin", ["inference", "models.read"], 0) == {"inference", "models.read"}
    assert held_scopes("member", old_defaults, 0) == SCOPES_BEFORE_ADMIN_SCOPES  # members had no admin routes
    assert held_scopes("admin", old_defaults, SCOPES_VERSION) == SCOPES_BEFORE_ADMIN_SCOPES  # a new key: as given
    old = Principal("gk-1", "ws", "default", "admin", tuple(old_defaults))  # decoded without scopes_version
    assert "providers.write" in KeyRecord.of(old).scopes


async def _chat_in_process(app, key: str, base: str) -> int:
    headers = {"x-gateway-api-key": key, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
               "authorization": "Bearer sk-test", "content-type": "application/json"}
    return (await call(app, "POST", "/v1/chat/completions", CHAT, headers)).status


async def _member_in_process(app, workspace: str) -> dict:
    made = await call(app, "POST", "/v1/api-keys", {"name": workspace, "workspace_id": workspace},
                      {"x-gateway-api-key": ADMIN_KEY})
    assert made.status == 201, made.text
    return made.json()


async def test_a_key_revoked_by_another_worker_drops_only_that_key_from_this_workers_cache(mock, tmp_path):
    env = {"GATEWAY_STATE_WATCH_INTERVAL_MS": "60000"}  # polled by hand below
    async with in_process(env, str(tmp_path)) as here, in_process(env, str(tmp_path)) as there:
        kept, revoked = await _member_in_process(here, "team-a"), await _member_in_process(there, "team-b")
        await here.runtime.watcher.poll()
        base = mock.scenario()
        assert await _chat_in_process(here, kept["key"], base) == 200
        assert await _chat_in_process(here, revoked["key"], base) == 200
        gone = await call(there, "DELETE", f"/v1/api-keys/{revoked['id']}?workspace_id=team-b", b"",
                          {"x-gateway-api-key": ADMIN_KEY})
        assert gone.status == 200, gone.text
        assert await _chat_in_process(there, revoked["key"], base) == 401  # the worker that revoked it: at once
        assert await here.runtime.watcher.poll()  # this worker: by its next poll
        assert await _chat_in_process(here, revoked["key"], base) == 401
        assert here.runtime.keys.known(kept["key"]) is not None  # the other workspace's key was never dropped


async def test_a_key_made_with_a_secret_just_refused_as_unknown_serves_at_once(mock):
    async with in_process() as app:
        secret = "gw-imported-" + secrets.token_urlsafe(16)
        base = mock.scenario()
        assert await _chat_in_process(app, secret, base) == 401  # remembered as unknown for a while
        await ApiKeys(app.runtime.store).create(name="imported", role="member", workspace="team-a", secret=secret)
        assert await _chat_in_process(app, secret, base) == 200
