"""Webhook credentials (the header values of a ``default.webhook`` check, a ``default.jwt`` check's secret) in saved
configs and saved guardrails, through the real gateway: sealed at rest (embedded store and Redis), masked in every
answer, sent in clear to the webhook when a request runs; masked values sent back keep them; records saved in clear
by an older release are sealed on first read."""

from __future__ import annotations

import copy
import tempfile

import msgspec
import pytest
from openai import OpenAI

from gateway.guardrails.saved import KIND as GUARDRAIL_KIND
from gateway.guardrails.saved import SavedCheck, SavedGuardrail
from tests.api.test_batches import CHAT, gateway_file, jsonl, wait_status
from tests.api.test_config_secrets import data_dir_bytes, in_store, legacy_record, redis_values, store_env
from tests.support.controlplane import api, chat, create_key
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for
from tests.support.servers import ADMIN_KEY, start_gateway
from tests.support.webhook import WebhookServer

__all__ = ["store_env"]  # the fixture, shared with the saved-config secrets tests

SAVED_AUTH = "Bearer wh-saved-secret-0123456789"
INPUT_KEY = "wh-input-apikey-0123456789abcdef"
HOOK_AUTH = "Bearer wh-hook-secret-0123456789ab"
AFTER_TOKEN = "wh-after-token-0123456789abcd"
JWT_SECRET = "jwt-hmac-secret-0123456789abcdef"
SECRETS = (SAVED_AUTH, INPUT_KEY, HOOK_AUTH, AFTER_TOKEN, JWT_SECRET, "wh-saved-secret", "wh-hook-secret")


@pytest.fixture(scope="module")
def webhook():
    server = WebhookServer().start()
    yield server
    server.stop()


def no_secret_in(data: str | bytes, where: str, secrets: tuple[str, ...] = SECRETS) -> None:
    raw = data.encode() if isinstance(data, str) else data
    for secret in secrets:
        assert secret.encode() not in raw, f"{secret!r} found in {where}"


def saved_guardrail(webhook: WebhookServer, path: str = "/saved") -> dict:
    """A denying guardrail whose webhook needs an Authorization header (and a plain one, masked too)."""
    return {"name": "hooked", "deny": True, "checks": [
        {"id": "default.webhook", "parameters": {"webhookURL": webhook.url + path,
                                                 "headers": {"Authorization": SAVED_AUTH, "X-Team": "blue"}}},
    ]}


def jwt_guardrail() -> dict:
    return {"name": "jwt", "checks": [{"id": "default.jwt", "parameters": {"secret": JWT_SECRET,
                                                                           "algorithms": ["HS256"]}}]}


def webhook_check(url: str, headers: dict) -> dict:
    return {"id": "default.webhook", "parameters": {"webhookURL": url, "headers": headers}}


def config_with_webhooks(base: str, webhook: WebhookServer, guardrail_id: str, tag: str = "") -> dict:
    """Webhooks in every place a config holds them: an input guardrail object at the root, a hook's checks and an
    after-request hook in a target, and the saved guardrail as an output guardrail."""
    return {
        "strategy": {"mode": "fallback"},
        "input_guardrails": [{"deny": True, "default.webhook": {"webhookURL": webhook.url + f"/input{tag}",
                                                                "headers": {"x-api-key": INPUT_KEY}}}],
        "targets": [{
            "provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1",
            "before_request_hooks": [{"id": "hook", "checks": [
                webhook_check(webhook.url + f"/hook{tag}", {"Authorization": HOOK_AUTH})]}],
            "after_request_hooks": [{"id": "after", "checks": [
                webhook_check(webhook.url + f"/after{tag}", {"x-token": AFTER_TOKEN})]}],
            "output_guardrails": [guardrail_id],
        }],
    }


def masked_config(config: dict) -> dict:
    """``config_with_webhooks`` as every answer shows it."""
    shown = copy.deepcopy(config)
    shown["input_guardrails"][0]["default.webhook"]["headers"]["x-api-key"] = "wh-****cdef"
    target = shown["targets"][0]
    target["api_key"] = "********"
    target["before_request_hooks"][0]["checks"][0]["parameters"]["headers"]["Authorization"] = "Bea****89ab"
    target["after_request_hooks"][0]["checks"][0]["parameters"]["headers"]["x-token"] = "wh-****abcd"
    return shown


MASKED_SAVED_HEADERS = {"Authorization": "Bea****6789", "X-Team": "********"}


def headers_at(webhook: WebhookServer, path: str) -> dict[str, str]:
    """The headers of the last call the webhook got at ``path``."""
    found = [headers for at, headers in list(webhook.received_headers) if at == path]
    assert found, f"the webhook got no call at {path}"
    return found[-1]


def assert_webhooks_got_the_secrets(webhook: WebhookServer, tag: str = "", saved_path: str = "/saved",
                                    saved_auth: str = SAVED_AUTH) -> None:
    assert headers_at(webhook, f"/input{tag}")["x-api-key"] == INPUT_KEY
    assert headers_at(webhook, f"/hook{tag}")["authorization"] == HOOK_AUTH
    assert headers_at(webhook, f"/after{tag}")["x-token"] == AFTER_TOKEN
    got = headers_at(webhook, saved_path)
    assert got["authorization"] == saved_auth and got["x-team"] == "blue"


def test_webhook_headers_are_masked_in_every_answer_and_the_webhook_gets_them(gateway, mock, webhook):
    admin = create_key(gateway)
    created = api(gateway, "POST", "/v1/guardrails", saved_guardrail(webhook), admin["key"])
    assert created.status == 201, created.text
    guard = created.json()
    assert "sealed" not in guard
    assert guard["checks"][0]["parameters"]["headers"] == MASKED_SAVED_HEADERS
    got = api(gateway, "GET", f"/v1/guardrails/{guard['id']}", key=admin["key"])
    listed = api(gateway, "GET", "/v1/guardrails", key=admin["key"])
    assert got.json()["checks"] == guard["checks"] and listed.json()["data"][0]["checks"] == guard["checks"]
    assert "sealed" not in listed.json()["data"][0]

    base = mock.scenario()
    config = config_with_webhooks(base, webhook, guard["id"])
    saved = api(gateway, "POST", "/v1/configs", {"name": "hooked", "config": config}, admin["key"])
    assert saved.status == 201, saved.text
    assert saved.json()["config"] == masked_config(config)
    got_config = api(gateway, "GET", f"/v1/configs/{saved.json()['id']}", key=admin["key"])
    listed_configs = api(gateway, "GET", "/v1/configs", key=admin["key"])
    assert got_config.json()["config"] == masked_config(config)
    for resp in (created, got, listed, saved, got_config, listed_configs):
        no_secret_in(resp.body, "an answer")

    resp = chat(gateway, admin["key"], **{"x-gateway-config": saved.json()["id"]})
    assert resp.status == 200, resp.text
    assert [h["verdict"] for h in resp.json()["hook_results"]["before_request_hooks"]] == [True, True]
    no_secret_in(resp.body, "the chat answer")
    assert_webhooks_got_the_secrets(webhook)


def test_masked_webhook_headers_sent_back_keep_the_stored_ones(gateway, mock, webhook):
    admin = create_key(gateway)
    guard = api(gateway, "POST", "/v1/guardrails", saved_guardrail(webhook, "/kept"), admin["key"]).json()
    base = mock.scenario()
    config = config_with_webhooks(base, webhook, guard["id"], tag="-kept")
    saved = api(gateway, "POST", "/v1/configs", {"name": "c", "config": config}, admin["key"]).json()
    guard_path, config_path = f"/v1/guardrails/{guard['id']}", f"/v1/configs/{saved['id']}"
    # as read, sent back unchanged (and a rename alone): every secret stays
    for guard_body, config_body in (({"checks": guard["checks"]}, {"config": saved["config"]}),
                                    ({"name": "renamed"}, {"name": "renamed"})):
        resp = api(gateway, "PUT", guard_path, guard_body, admin["key"])
        assert resp.status == 200 and resp.json()["checks"] == guard["checks"], resp.text
        resp = api(gateway, "PUT", config_path, config_body, admin["key"])
        assert resp.status == 200 and resp.json()["config"] == masked_config(config), resp.text
        assert chat(gateway, admin["key"], **{"x-gateway-config": saved["id"]}).status == 200
        assert_webhooks_got_the_secrets(webhook, "-kept", "/kept")
    # a new value replaces the stored one; the masked other stays
    changed = copy.deepcopy(guard["checks"])
    changed[0]["parameters"]["headers"]["Authorization"] = "Bearer wh-replaced-0123456789"
    resp = api(gateway, "PUT", guard_path, {"checks": changed}, admin["key"])
    assert resp.status == 200, resp.text
    assert resp.json()["checks"][0]["parameters"]["headers"] == {"Authorization": "Bea****6789", "X-Team": "********"}
    assert chat(gateway, admin["key"], **{"x-gateway-config": saved["id"]}).status == 200
    assert_webhooks_got_the_secrets(webhook, "-kept", "/kept", "Bearer wh-replaced-0123456789")
    # a masked value where nothing is stored is a 400 naming its place
    moved = copy.deepcopy(guard["checks"])
    moved[0]["parameters"]["headers"] = {"x-other": "Bea****6789"}
    resp = api(gateway, "PUT", guard_path, {"checks": moved}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "checks[0].parameters.headers.x-other", resp.text
    resp = api(gateway, "POST", "/v1/guardrails", {"name": "copy", "checks": guard["checks"]}, admin["key"])
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == "checks[0].parameters.headers.Authorization"
    assert "masked" in resp.json()["error"]["message"]
    resp = api(gateway, "POST", "/v1/configs", {"name": "copy", "config": saved["config"]}, admin["key"])
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == "config.input_guardrails[0].default.webhook.headers.x-api-key"


def test_no_webhook_secret_reaches_the_store_the_answers_or_the_logs(mock, webhook, store_env):
    env, data_dir, redis_at = store_env
    base = mock.scenario()
    server = start_gateway(env, data_dir=data_dir)

    def check(step: str) -> None:
        no_secret_in(data_dir_bytes(data_dir), f"the data directory after {step}")
        if redis_at is not None:
            no_secret_in(redis_values(*redis_at), f"Redis after {step}")

    try:
        admin = create_key(server)
        guard = api(server, "POST", "/v1/guardrails", saved_guardrail(webhook, "/rest"), admin["key"])
        jwt = api(server, "POST", "/v1/guardrails", jwt_guardrail(), admin["key"])
        assert guard.status == 201 and jwt.status == 201, guard.text + jwt.text
        assert jwt.json()["checks"][0]["parameters"]["secret"] == "jwt****cdef"
        config = config_with_webhooks(base, webhook, guard.json()["id"], tag="-rest")
        saved = api(server, "POST", "/v1/configs", {"name": "c", "config": config}, admin["key"])
        assert saved.status == 201, saved.text
        check("create")
        # updates with other secrets in clear: stored sealed as well
        updated = saved_guardrail(webhook, "/rest")
        updated["checks"][0]["parameters"]["headers"]["Authorization"] = "Bearer wh-saved-secret-updated-42"
        resp = api(server, "PUT", f"/v1/guardrails/{guard.json()['id']}", {"checks": updated["checks"]},
                   admin["key"])
        assert resp.status == 200, resp.text
        resp = api(server, "PUT", f"/v1/configs/{saved.json()['id']}", {"config": config}, admin["key"])
        assert resp.status == 200, resp.text
        check("update")
        for _ in range(3):
            assert chat(server, admin["key"], **{"x-gateway-config": saved.json()["id"]}).status == 200
        assert_webhooks_got_the_secrets(webhook, "-rest", "/rest", "Bearer wh-saved-secret-updated-42")
        wait_for(lambda: len(api(server, "GET", "/v1/logs", key=admin["key"]).json()["data"]) == 3, timeout=5.0)
        no_secret_in(api(server, "GET", "/v1/logs", key=admin["key"]).body, "the request logs")
        check("use")
        if redis_at is not None:
            assert b'"sealed":"v1.' in redis_values(*redis_at)  # the records are there, sealed
    finally:
        server.stop()
    check("a stop")
    no_secret_in(server.output(), "the gateway's console output")


def test_a_guardrail_and_config_saved_in_clear_are_sealed_on_first_read(mock, webhook, store_env):
    env, data_dir, redis_at = store_env
    base = mock.scenario()
    body = saved_guardrail(webhook, "/legacy")
    guard = SavedGuardrail(id="gr_legacy", workspace_id="default", name="legacy", deny=True,
                           checks=msgspec.convert(body["checks"], list[SavedCheck]),
                           created_at="2026-01-01T00:00:00.000Z", last_updated_at="2026-01-01T00:00:00.000Z")
    config = legacy_record("default", config_with_webhooks(base, webhook, guard.id, tag="-legacy"), "pc-legacy-hooks")

    async def write_plain(store) -> None:
        await store.record_put(GUARDRAIL_KIND, guard.id, "default", msgspec.json.encode(guard))
        await store.record_put("config", config.id, "default", msgspec.json.encode(config))

    async def stored_docs(store) -> list[bytes]:
        return [(await store.record_get(GUARDRAIL_KIND, guard.id)).doc,
                (await store.record_get("config", config.id)).doc]

    in_store(data_dir, redis_at, write_plain)
    assert SAVED_AUTH.encode() in in_store(data_dir, redis_at, stored_docs)[0]  # in clear, as before
    server = start_in_process(env, data_dir=data_dir)
    try:
        resp = chat(server, ADMIN_KEY, **{"x-gateway-config": config.id})
        assert resp.status == 200, resp.text
        assert_webhooks_got_the_secrets(webhook, "-legacy", "/legacy")
        got = api(server, "GET", f"/v1/guardrails/{guard.id}")
        assert got.status == 200 and got.json()["checks"][0]["parameters"]["headers"] == MASKED_SAVED_HEADERS
        assert got.json()["last_updated_at"] == "2026-01-01T00:00:00.000Z"  # sealing is no user change
    finally:
        server.stop()
    for doc in in_store(data_dir, redis_at, stored_docs):
        assert b'"sealed":"v1.' in doc
        no_secret_in(doc, "a record read once")
    server = start_in_process(env, data_dir=data_dir)  # and they keep working, now sealed
    try:
        webhook.received_headers.clear()
        assert chat(server, ADMIN_KEY, **{"x-gateway-config": config.id}).status == 200
        assert_webhooks_got_the_secrets(webhook, "-legacy", "/legacy")
    finally:
        server.stop()


def test_a_guardrail_sealed_under_another_secret_key_says_so_and_can_be_replaced(mock, webhook):
    data_dir = tempfile.mkdtemp(prefix="gw-webhook-secrets-")
    server = start_in_process(data_dir=data_dir)
    try:
        guard = api(server, "POST", "/v1/guardrails", saved_guardrail(webhook, "/rekeyed"), ADMIN_KEY).json()
    finally:
        server.stop()
    base = mock.scenario()
    cfg = {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1", "input_guardrails": [guard["id"]]}
    server = start_in_process({"GATEWAY_SECRET_KEY": "a-different-key"}, data_dir=data_dir)
    try:
        resp = chat(server, ADMIN_KEY, **{"x-gateway-config": msgspec.json.encode(cfg).decode()})
        assert resp.status == 500, resp.text
        error = resp.json()["error"]
        assert error["code"] == "record_unusable" and guard["id"] in error["message"]
        assert "GATEWAY_SECRET_KEY" in error["message"]
        assert mock.calls(base)["calls"] == 0  # never run without its check
        got = api(server, "GET", f"/v1/guardrails/{guard['id']}")
        assert got.status == 200 and got.json()["checks"] == guard["checks"]  # reading needs no opening
        assert api(server, "PUT", f"/v1/guardrails/{guard['id']}", {"name": "n"}).status == 500
        # the way out: send the checks again with their credentials in clear
        fixed = api(server, "PUT", f"/v1/guardrails/{guard['id']}",
                    {"checks": saved_guardrail(webhook, "/rekeyed")["checks"]})
        assert fixed.status == 200, fixed.text
        assert chat(server, ADMIN_KEY, **{"x-gateway-config": msgspec.json.encode(cfg).decode()}).status == 200
        assert headers_at(webhook, "/rekeyed")["authorization"] == SAVED_AUTH
    finally:
        server.stop()


def test_a_batch_keeps_its_headers_and_inline_webhook_credentials_sealed(mock, webhook, store_env):
    """A gateway-run batch stores the headers its lines are sent with (the provider bearer, an inline config with
    a webhook's credentials): sealed, never in the store in clear; each line still sends them."""
    env, data_dir, redis_at = store_env
    base = mock.scenario()
    bearer = "sk-batch-bearer-0123456789abcdef"
    config = {"provider": "vendorA", "custom_host": base + "/v1", "input_guardrails": [
        {"deny": True, "default.webhook": {"webhookURL": webhook.url + "/batch", "headers": {"x-api-key": INPUT_KEY}}}]}
    server = start_in_process({"GATEWAY_BATCH_POLL_MS": "100", **env}, data_dir=data_dir)
    try:
        watch = OpenAI(base_url=f"{server.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60,
                       http_client=server.http_client())
        runner = OpenAI(base_url=f"{server.url}/v1", api_key=bearer, max_retries=0, timeout=60,
                        http_client=server.http_client(), default_headers={
            "x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode()})
        created = runner.batches.create(input_file_id=gateway_file(watch, jsonl(2)), endpoint=CHAT,
                                        completion_window="immediate")
        done = wait_status(watch, created.id, ("completed", "failed"))
        assert (done.status, done.request_counts.completed) == ("completed", 2), done.errors
        assert headers_at(webhook, "/batch")["x-api-key"] == INPUT_KEY
        assert [r["headers"]["authorization"] for r in mock.calls(base)["requests"]] == [f"Bearer {bearer}"] * 2
        stored = data_dir_bytes(data_dir) + (redis_values(*redis_at) if redis_at is not None else b"")
        assert created.id.encode() in stored
        no_secret_in(stored, "the state store", (bearer, INPUT_KEY))
    finally:
        server.stop()


def test_a_stored_webhook_credential_never_follows_a_change_of_webhook_url(gateway, mock, webhook):
    """Moving a webhook check to another URL while sending its credentials back masked would send the stored
    credentials to whoever runs the new URL: the update is refused naming the credential's place, and succeeds when
    the credential itself is sent again (saved guardrails and saved configs alike)."""
    admin = create_key(gateway)
    guard = api(gateway, "POST", "/v1/guardrails", saved_guardrail(webhook, "/before-move"), admin["key"]).json()
    guard_path = f"/v1/guardrails/{guard['id']}"
    moved = copy.deepcopy(guard["checks"])
    moved[0]["parameters"]["webhookURL"] = webhook.url + "/after-move"
    resp = api(gateway, "PUT", guard_path, {"checks": moved}, admin["key"])
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == "checks[0].parameters.headers.Authorization"
    assert "another host" in resp.json()["error"]["message"]
    assert api(gateway, "GET", guard_path, key=admin["key"]).json()["checks"] == guard["checks"]
    moved[0]["parameters"]["headers"] = {"Authorization": "Bearer wh-new-home-0123456789", "X-Team": "blue"}
    resp = api(gateway, "PUT", guard_path, {"checks": moved}, admin["key"])
    assert resp.status == 200, resp.text

    config = config_with_webhooks(mock.scenario(), webhook, guard["id"], tag="-move")
    saved = api(gateway, "POST", "/v1/configs", {"name": "c", "config": config}, admin["key"]).json()
    config_path = f"/v1/configs/{saved['id']}"
    shown = copy.deepcopy(saved["config"])
    shown["input_guardrails"][0]["default.webhook"]["webhookURL"] = webhook.url + "/elsewhere"
    resp = api(gateway, "PUT", config_path, {"config": shown}, admin["key"])
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == "config.input_guardrails[0].default.webhook.headers.x-api-key"
    hooked = copy.deepcopy(saved["config"])
    hooked["targets"][0]["before_request_hooks"][0]["checks"][0]["parameters"]["webhookURL"] = webhook.url + "/x"
    resp = api(gateway, "PUT", config_path, {"config": hooked}, admin["key"])
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"].endswith("before_request_hooks[0].checks[0].parameters.headers.Authorization")
    assert api(gateway, "GET", config_path, key=admin["key"]).json()["config"] == saved["config"]
