"""A Redis outage as users see it: requests keep flowing, /health reports the store, /ready follows the fail
mode (503 while down only when limits fail closed), errors are counted, and the gateway reconnects by itself."""

from __future__ import annotations

import msgspec

from gateway.controlplane.keys import ApiKeys
from gateway.state.base import RECORD_CHANGE_LOG
from gateway.state.redis import RedisStateStore
from tests.support.asgi import call, in_process
from tests.support.http import post, request
from tests.support.poll import await_for, wait_for
from tests.support.redis_servers import RedisProcess
from tests.support.servers import ADMIN_KEY, start_gateway

OUTAGE_S = 20.0  # each wait: a probe every 100 ms, generous on a loaded box
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def state_of(url: str) -> dict:
    return request("GET", url + "/health").json()["state"]


def test_redis_down_then_back(mock):
    redis = RedisProcess().start()
    common = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_PROBE_INTERVAL_MS": "100",
              "GATEWAY_STATE_TIMEOUT_MS": "300"}
    closed = start_gateway(common | {"GATEWAY_STATE_FAIL_MODE": "closed"})
    opened = start_gateway(common)
    try:
        assert wait_for(lambda: state_of(closed.url) == {"backend": "redis", "healthy": True,
                                                         "fail_mode": "closed"}, OUTAGE_S)
        assert wait_for(lambda: request("GET", closed.url + "/ready").status == 200, OUTAGE_S)
        redis.stop()
        assert wait_for(lambda: not state_of(closed.url)["healthy"], OUTAGE_S)
        assert wait_for(lambda: request("GET", closed.url + "/ready").status == 503, OUTAGE_S)
        assert wait_for(lambda: not state_of(opened.url)["healthy"], OUTAGE_S)
        assert request("GET", opened.url + "/ready").status == 200  # fail open: stays in rotation
        base = mock.scenario()
        config = {"provider": "vendorA", "api_key": "k", "custom_host": base + "/v1",
                  "cb_config": {"failure_threshold": 1, "cooldown_interval": 30000}}
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
                   "content-type": "application/json"}
        for server in (closed, opened):
            assert post(server.url + "/v1/chat/completions", CHAT, headers).status == 200
        # a saved config this worker has not cached needs the store: a 503 in words, no internal class names
        saved = post(opened.url + "/v1/chat/completions", CHAT, {**headers, "x-gateway-config": "pc-not-cached"})
        assert saved.status == 503, saved.text
        assert "store" in saved.json()["error"]["message"] and "StateStore" not in saved.text, saved.text
        listed = request("GET", opened.url + "/v1/configs", headers={"x-gateway-api-key": ADMIN_KEY})
        assert listed.status == 503 and "StateStore" not in listed.text, listed.text
        metrics = {"x-gateway-api-key": ADMIN_KEY}
        assert wait_for(lambda: "gateway_state_store_errors_total{" in request(
            "GET", closed.url + "/metrics", headers=metrics).text, timeout=10)
        redis.start()
        assert wait_for(lambda: state_of(closed.url)["healthy"], OUTAGE_S)
        assert wait_for(lambda: request("GET", closed.url + "/ready").status == 200, OUTAGE_S)
    finally:
        closed.stop()
        opened.stop()
        redis.stop()


# --- per-kind invalidation: another tenant's writes never cost a workspace its cached keys ----------------------

FILE_BOUNDARY = "gwtestboundary"
FILE_BODY = (f"--{FILE_BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
             f"--{FILE_BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
             "Content-Type: application/jsonl\r\n\r\n"
             '{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
             f"\r\n--{FILE_BOUNDARY}--\r\n").encode()


async def _member(app, workspace: str) -> str:
    return (await _member_record(app, workspace))["key"]


async def _member_record(app, workspace: str) -> dict:
    made = await call(app, "POST", "/v1/api-keys", {"name": workspace, "workspace_id": workspace},
                      {"x-gateway-api-key": ADMIN_KEY})
    assert made.status == 201, made.text
    return made.json()


async def _chat(app, key: str, base: str) -> int:
    headers = {"x-gateway-api-key": key, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
               "authorization": "Bearer sk-test", "content-type": "application/json"}
    return (await call(app, "POST", "/v1/chat/completions", CHAT, headers)).status


async def test_a_file_written_by_another_workspace_before_an_outage_leaves_every_cached_key_serving(mock):
    redis = RedisProcess().start()
    env = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_PROBE_INTERVAL_MS": "100",
           "GATEWAY_STATE_TIMEOUT_MS": "300", "GATEWAY_STATE_WATCH_INTERVAL_MS": "50"}
    other_instance = RedisStateStore(redis.url, key_prefix="gw:", timeout_ms=2000)
    try:
        async with in_process(env) as app:
            await other_instance.start()
            team, other = await _member(app, "team-a"), await _member(app, "team-b")
            await app.runtime.watcher.poll()  # the keys' own creation seen (each drops only its own key's answer)
            base = mock.scenario()
            assert await _chat(app, team, base) == 200 and await _chat(app, other, base) == 200  # cached now
            # another workspace writes a file here, and another instance writes records of other kinds
            upload = await call(app, "POST", "/v1/files", FILE_BODY, {
                "x-gateway-api-key": other, "content-type": f"multipart/form-data; boundary={FILE_BOUNDARY}"})
            assert upload.status == 200, upload.text
            await other_instance.record_put("file", "file-gw-elsewhere", "team-b", b"{}")
            await other_instance.record_put("batch", "batch-elsewhere", "team-b", b"{}")
            await app.runtime.watcher.poll()  # what the watcher would read within 50 ms: both writes seen
            redis.stop()
            await await_for(lambda: not app.runtime.store.healthy, OUTAGE_S)
            for _ in range(3):
                assert await _chat(app, team, base) == 200
            assert await _chat(app, other, base) == 200  # the writer's own key too
            # the store is down indeed: a key this worker has not seen cannot be checked
            unknown = await call(app, "POST", "/v1/chat/completions", CHAT, {"x-gateway-api-key": "gw-unseen"})
            assert unknown.status == 503, unknown.text
    finally:
        await other_instance.close()
        redis.stop()


async def test_a_revoked_key_stops_at_once_here_and_promptly_when_revoked_elsewhere(mock):
    redis = RedisProcess().start()
    env = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_WATCH_INTERVAL_MS": "100"}
    other_instance = RedisStateStore(redis.url, key_prefix="gw:", timeout_ms=2000)
    try:
        async with in_process(env) as app:
            await other_instance.start()
            here, elsewhere = await _member_record(app, "team-a"), await _member_record(app, "team-b")
            await app.runtime.watcher.poll()
            base = mock.scenario()
            assert await _chat(app, here["key"], base) == 200 and await _chat(app, elsewhere["key"], base) == 200
            revoked = await call(app, "DELETE", f"/v1/api-keys/{here['id']}?workspace_id=team-a", b"",
                                 {"x-gateway-api-key": ADMIN_KEY})
            assert revoked.status == 200, revoked.text
            assert await _chat(app, here["key"], base) == 401  # the worker that revoked it: at once
            await app.runtime.watcher.poll()
            assert await _chat(app, elsewhere["key"], base) == 200  # cached again
            # revoked through another instance: this worker's watcher hears of it within a poll or two
            await ApiKeys(other_instance).revoke("team-b", elsewhere["id"])
            await await_for(lambda: app.runtime.keys.known(elsewhere["key"]) is None, OUTAGE_S)
            assert await _chat(app, elsewhere["key"], base) == 401
    finally:
        await other_instance.close()
        redis.stop()


async def test_keys_another_tenant_creates_rotates_and_revokes_before_an_outage_leave_every_cached_key_serving(mock):
    redis = RedisProcess().start()
    env = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_PROBE_INTERVAL_MS": "100",
           "GATEWAY_STATE_TIMEOUT_MS": "300", "GATEWAY_STATE_WATCH_INTERVAL_MS": "50"}
    other_instance = RedisStateStore(redis.url, key_prefix="gw:", timeout_ms=2000)
    try:
        async with in_process(env) as app:
            await other_instance.start()
            team, other = await _member(app, "team-a"), await _member(app, "team-b")
            await app.runtime.watcher.poll()
            base = mock.scenario()
            assert await _chat(app, team, base) == 200 and await _chat(app, other, base) == 200  # cached now
            # an unrelated tenant's admin creates and revokes keys here, and another instance does the same
            tenant_admin = await call(app, "POST", "/v1/api-keys",
                                      {"name": "c", "workspace_id": "team-c", "role": "admin"},
                                      {"x-gateway-api-key": ADMIN_KEY})
            assert tenant_admin.status == 201, tenant_admin.text
            as_tenant = {"x-gateway-api-key": tenant_admin.json()["key"]}
            made = await call(app, "POST", "/v1/api-keys", {"name": "bot"}, as_tenant)
            assert made.status == 201, made.text
            assert (await call(app, "DELETE", f"/v1/api-keys/{made.json()['id']}", b"", as_tenant)).status == 200
            elsewhere = ApiKeys(other_instance)
            record, _ = await elsewhere.create(name="elsewhere", role="member", workspace="team-c")
            await elsewhere.rotate("team-c", record.id)
            await elsewhere.revoke("team-c", record.id)
            await app.runtime.watcher.poll()  # what the watcher would read within 50 ms: every write seen
            assert app.runtime.keys.known(team) is not None and app.runtime.keys.known(other) is not None
            redis.stop()
            await await_for(lambda: not app.runtime.store.healthy, OUTAGE_S)
            for _ in range(3):
                assert await _chat(app, team, base) == 200
                assert await _chat(app, other, base) == 200
            unknown = await call(app, "POST", "/v1/chat/completions", CHAT, {"x-gateway-api-key": "gw-unseen"})
            assert unknown.status == 503, unknown.text  # the store is down indeed
    finally:
        await other_instance.close()
        redis.stop()


async def test_a_key_revoked_elsewhere_stops_by_the_next_poll_and_leaves_the_other_keys_cached(mock):
    redis = RedisProcess().start()
    env = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_WATCH_INTERVAL_MS": "100"}
    other_instance = RedisStateStore(redis.url, key_prefix="gw:", timeout_ms=2000)
    try:
        async with in_process(env) as app:
            await other_instance.start()
            kept, revoked = await _member_record(app, "team-a"), await _member_record(app, "team-b")
            await app.runtime.watcher.poll()
            base = mock.scenario()
            assert await _chat(app, kept["key"], base) == 200 and await _chat(app, revoked["key"], base) == 200
            await ApiKeys(other_instance).revoke("team-b", revoked["id"])
            await await_for(lambda: app.runtime.keys.known(revoked["key"]) is None, OUTAGE_S)
            assert await _chat(app, revoked["key"], base) == 401
            assert app.runtime.keys.known(kept["key"]) is not None  # never dropped: served from memory
    finally:
        await other_instance.close()
        redis.stop()


async def test_more_key_changes_than_the_change_log_holds_drop_every_cached_key(mock):
    redis = RedisProcess().start()
    env = {"GATEWAY_REDIS_URL": redis.url, "GATEWAY_STATE_WATCH_INTERVAL_MS": "60000"}  # polled by hand below
    other_instance = RedisStateStore(redis.url, key_prefix="gw:", timeout_ms=2000)
    try:
        async with in_process(env) as app:
            await other_instance.start()
            team = await _member(app, "team-a")
            await app.runtime.watcher.poll()
            base = mock.scenario()
            assert await _chat(app, team, base) == 200
            elsewhere = ApiKeys(other_instance)
            for i in range(RECORD_CHANGE_LOG + 1):  # one principal written per key: the log cannot cover the gap
                await elsewhere.create(name=f"bulk {i}", role="member", workspace="team-c")
            await app.runtime.watcher.poll()
            assert app.runtime.keys.known(team) is None  # which keys changed is unknown: every answer dropped
            assert await _chat(app, team, base) == 200  # and read again
    finally:
        await other_instance.close()
        redis.stop()
