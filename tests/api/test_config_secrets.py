"""Credentials in saved configs, through the real gateway: sealed at rest (embedded store and Redis), masked in
every answer, in clear only where a request uses them; masked values sent back keep the stored secret; records
saved in clear by an older release are sealed on first read."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import msgspec
import pytest

from gateway.controlplane.configs import KIND, SavedConfig
from gateway.state.redis import RedisStateStore
from gateway.state.sqlite import SQLiteStateStore
from tests.support.controlplane import api, chat, clear_redis_prefix, create_key
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for
from tests.support.redis_servers import random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY, start_gateway

API_KEY = "sk-root-secret-0123456789abcdef"
NESTED_KEY = "sk-nested-secret-9876543210fedcba"
AWS_ID = "AKIA-secret-id-0123456789"
AWS_SECRET = "aws-secret-access-key-0123456789"
AWS_TOKEN = "aws-session-token-0123456789abc"
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQ-secret-private-key-body\n-----END PRIVATE KEY-----\n"
SECRETS = (API_KEY, NESTED_KEY, AWS_ID, AWS_SECRET, AWS_TOKEN, PRIVATE_KEY, "MIIEvQ-secret-private-key-body")


def config_with_secrets(base: str, api_key: str = NESTED_KEY) -> dict:
    """A fallback whose first target (vendorA on the mock) answers; the others hold cloud secrets deeper down."""
    return {
        "api_key": API_KEY,
        "strategy": {"mode": "fallback"},
        "targets": [
            {"provider": "vendorA", "api_key": api_key, "custom_host": base + "/v1"},
            {"strategy": {"mode": "fallback"}, "targets": [
                {"provider": "cloudA", "cloudA_access_key_id": AWS_ID, "cloudA_secret_access_key": AWS_SECRET,
                 "cloudA_session_token": AWS_TOKEN, "cloudA_region": "us-east-1"},
                {"provider": "cloudC", "cloudC_region": "us-central1", "cloudC_project_id": "p",
                 "cloudC_service_account_json": {"type": "service_account", "private_key": PRIVATE_KEY,
                                                 "client_email": "a@p.iam.example"}},
            ]},
        ],
    }


def masked_form(base: str, nested: str = "sk-****dcba") -> dict:
    """``config_with_secrets`` as every answer shows it."""
    shown = config_with_secrets(base)
    shown["api_key"] = "sk-****cdef"
    shown["targets"][0]["api_key"] = nested
    deep = shown["targets"][1]["targets"]
    deep[0].update(cloudA_access_key_id="AKI****6789", cloudA_secret_access_key="aws****6789",
                   cloudA_session_token="aws****9abc")
    deep[1]["cloudC_service_account_json"] = "********"
    return shown


def sent_key(mock, base: str) -> str:
    return mock.calls(base)["requests"][-1]["headers"]["authorization"]


def no_secret_in(text: str | bytes, where: str) -> None:
    data = text.encode() if isinstance(text, str) else text
    for secret in SECRETS:
        assert secret.encode() not in data, f"{secret!r} found in {where}"


def test_every_answer_masks_the_secrets_and_requests_use_them(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    created = api(gateway, "POST", "/v1/configs", {"name": "cloudy", "config": config_with_secrets(base)},
                  admin["key"])
    assert created.status == 201, created.text
    record = created.json()
    assert record["config"] == masked_form(base) and "sealed" not in record
    got = api(gateway, "GET", f"/v1/configs/{record['id']}", key=admin["key"])
    listed = api(gateway, "GET", "/v1/configs", key=admin["key"])
    for resp in (created, got, listed):
        no_secret_in(resp.body, "an answer")
    assert got.json()["config"] == masked_form(base)
    assert listed.json()["data"][0]["config"] == masked_form(base)
    resp = chat(gateway, admin["key"], **{"x-gateway-config": record["id"]})
    assert resp.status == 200, resp.text
    assert sent_key(mock, base) == f"Bearer {NESTED_KEY}"


def test_masked_values_sent_back_keep_the_stored_secret(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    record = api(gateway, "POST", "/v1/configs", {"name": "c", "config": config_with_secrets(base)},
                 admin["key"]).json()
    path = f"/v1/configs/{record['id']}"
    # the config as read, sent back unchanged (and a rename alone): every secret stays
    for body in ({"config": record["config"]}, {"name": "renamed"}):
        resp = api(gateway, "PUT", path, body, admin["key"])
        assert resp.status == 200, resp.text
        assert resp.json()["config"] == masked_form(base)
        assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
        assert sent_key(mock, base) == f"Bearer {NESTED_KEY}"
    # a new value replaces the secret at its place; the masked others stay
    changed = masked_form(base)
    changed["targets"][0]["api_key"] = "sk-replaced-0123456789"
    resp = api(gateway, "PUT", path, {"config": changed}, admin["key"])
    assert resp.status == 200 and resp.json()["config"]["targets"][0]["api_key"] == "sk-****6789"
    assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
    assert sent_key(mock, base) == "Bearer sk-replaced-0123456789"
    # a masked value where nothing is stored (moved, or in a new config) is a 400 naming the place
    moved = {"strategy": {"mode": "fallback"}, "targets": [{"provider": "vendorA", "custom_host": base + "/v1"},
                                                            record["config"]["targets"][0]]}
    resp = api(gateway, "PUT", path, {"config": moved}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "config.targets[1].api_key", resp.text
    resp = api(gateway, "POST", "/v1/configs", {"name": "copy", "config": record["config"]}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "config.api_key", resp.text
    assert "masked" in resp.json()["error"]["message"]
    assert sent_key(mock, base) == "Bearer sk-replaced-0123456789"


# --- at rest: the data directory and Redis hold no secret ----------------------------------------------------------


def redis_values(url: str, prefix: str) -> bytes:
    """Every raw value under ``prefix``, whatever its type."""
    import redis

    client = redis.Redis.from_url(url)
    out = []
    try:
        for key in client.scan_iter(match=prefix + "*", count=500):
            kind = client.type(key).decode()
            out.append(key)
            if kind == "string":
                out.append(client.get(key) or b"")
            elif kind == "hash":
                out.extend(b"%s=%s" % pair for pair in client.hgetall(key).items())
            elif kind == "list":
                out.extend(client.lrange(key, 0, -1))
            elif kind in ("set", "zset"):
                out.extend(client.zrange(key, 0, -1) if kind == "zset" else client.smembers(key))
            elif kind == "stream":
                out.extend(repr(entry).encode() for entry in client.xrange(key))
    finally:
        client.close()
    return b"\n".join(out)


def data_dir_bytes(data_dir: str) -> bytes:
    return b"".join(p.read_bytes() for p in Path(data_dir).rglob("*") if p.is_file())


@pytest.fixture(params=["embedded", "redis"])
def store_env(request):
    """(settings, data dir, Redis url and prefix or None) for a gateway on the embedded store or on Redis."""
    data_dir = tempfile.mkdtemp(prefix="gw-config-secrets-")
    if request.param == "embedded":
        yield {}, data_dir, None
        return
    url, prefix = test_redis_url(), random_prefix()
    yield {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix}, data_dir, (url, prefix)
    clear_redis_prefix(url, prefix)


def test_no_secret_reaches_the_store_the_answers_or_the_logs(mock, store_env):
    env, data_dir, redis_at = store_env
    base = mock.scenario()
    server = start_gateway(env, data_dir=data_dir)

    def check(step: str) -> None:
        no_secret_in(data_dir_bytes(data_dir), f"the data directory after {step}")
        if redis_at is not None:
            no_secret_in(redis_values(*redis_at), f"Redis after {step}")

    try:
        admin = create_key(server)
        created = api(server, "POST", "/v1/configs", {"name": "c", "config": config_with_secrets(base)},
                      admin["key"])
        assert created.status == 201, created.text
        record = created.json()
        check("create")
        updated = config_with_secrets(base, api_key="sk-updated-0123456789")
        resp = api(server, "PUT", f"/v1/configs/{record['id']}", {"config": updated}, admin["key"])
        assert resp.status == 200, resp.text
        no_secret_in(resp.body, "the update's answer")
        assert b"sk-updated-0123456789" not in resp.body
        check("update")
        for _ in range(3):
            assert chat(server, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
        assert sent_key(mock, base) == "Bearer sk-updated-0123456789"
        assert wait_for(lambda: len(api(server, "GET", "/v1/logs", key=admin["key"]).json()["data"]) == 3)
        logs = api(server, "GET", "/v1/logs", key=admin["key"])
        no_secret_in(logs.body, "the request logs")
        assert b"sk-updated-0123456789" not in logs.body
        check("use")
        if redis_at is not None:
            assert b'"sealed":"v1.' in redis_values(*redis_at)  # the record is there, sealed
    finally:
        server.stop()
    check("a stop")
    no_secret_in(server.output(), "the gateway's console output")
    assert "sk-updated-0123456789" not in server.output()


# --- records saved in clear before this release -------------------------------------------------------------------


def legacy_record(workspace: str, config: dict, id: str) -> SavedConfig:
    return SavedConfig(id=id, workspace_id=workspace, name="legacy", config=msgspec.Raw(msgspec.json.encode(config)),
                       created_at="2026-01-01T00:00:00.000Z", last_updated_at="2026-01-01T00:00:00.000Z")


def open_store(data_dir: str, redis_at: tuple[str, str] | None):
    if redis_at is not None:
        return RedisStateStore(redis_at[0], key_prefix=redis_at[1], timeout_ms=5000)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    return SQLiteStateStore(str(Path(data_dir) / "state.db"), str(Path(data_dir) / "cache.db"))


def in_store(data_dir: str, redis_at, work):
    async def run():
        store = open_store(data_dir, redis_at)
        await store.start()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


def test_a_record_saved_in_clear_is_sealed_on_first_read_and_keeps_working(mock, store_env):
    env, data_dir, redis_at = store_env
    base = mock.scenario()
    config = config_with_secrets(base)
    ids = {"used": "pc-legacy-used", "read": "pc-legacy-read"}

    async def write_plain(store) -> None:
        for id in ids.values():
            doc = msgspec.json.encode(legacy_record("default", config, id))
            await store.record_put(KIND, id, "default", doc)

    async def stored_docs(store) -> dict[str, bytes]:
        return {id: (await store.record_get(KIND, id)).doc for id in ids.values()}

    in_store(data_dir, redis_at, write_plain)
    assert API_KEY.encode() in in_store(data_dir, redis_at, stored_docs)[ids["used"]]  # in clear, as before
    server = start_in_process(env, data_dir=data_dir)
    try:
        resp = chat(server, ADMIN_KEY, **{"x-gateway-config": ids["used"]})
        assert resp.status == 200, resp.text
        assert sent_key(mock, base) == f"Bearer {NESTED_KEY}"
        got = api(server, "GET", f"/v1/configs/{ids['read']}")
        assert got.status == 200 and got.json()["config"] == masked_form(base)
        assert got.json()["last_updated_at"] == "2026-01-01T00:00:00.000Z"  # sealing is no user change
    finally:
        server.stop()
    docs = in_store(data_dir, redis_at, stored_docs)
    for id, doc in docs.items():
        assert b'"sealed":"v1.' in doc, id
        no_secret_in(doc, f"the record {id}")
    # and they keep working after a restart, now sealed
    server = start_in_process(env, data_dir=data_dir)
    try:
        for id in ids.values():
            assert chat(server, ADMIN_KEY, **{"x-gateway-config": id}).status == 200
        assert sent_key(mock, base) == f"Bearer {NESTED_KEY}"
    finally:
        server.stop()



def test_a_config_sealed_under_another_secret_key_says_which_setting_to_align(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-config-secrets-")
    base = mock.scenario()
    server = start_in_process(data_dir=data_dir)
    try:
        admin = create_key(server)
        record = api(server, "POST", "/v1/configs", {"name": "c", "config": config_with_secrets(base)},
                     admin["key"]).json()
    finally:
        server.stop()
    server = start_in_process({"GATEWAY_SECRET_KEY": "a-different-key"}, data_dir=data_dir)
    try:
        resp = chat(server, admin["key"], **{"x-gateway-config": record["id"]})
        assert resp.status == 500, resp.text
        error = resp.json()["error"]
        assert error["code"] == "record_unusable" and error["param"] == "x-gateway-config"
        assert "GATEWAY_SECRET_KEY" in error["message"] and record["id"] in error["message"]
        got = api(server, "GET", f"/v1/configs/{record['id']}", key=admin["key"])
        assert got.status == 200 and got.json()["config"] == masked_form(base)  # reading needs no opening
        assert api(server, "PUT", f"/v1/configs/{record['id']}", {"name": "n"}, admin["key"]).status == 500
        assert mock.calls(base)["calls"] == 0
        # the way out: send the config again with its secrets (no masked value needs the old key)
        fixed = api(server, "PUT", f"/v1/configs/{record['id']}", {"config": config_with_secrets(base)}, admin["key"])
        assert fixed.status == 200, fixed.text
        assert chat(server, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
        assert sent_key(mock, base) == f"Bearer {NESTED_KEY}"
    finally:
        server.stop()
