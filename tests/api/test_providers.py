"""``/v1/providers`` (provider slugs) through the real gateway, and every way a request may use a slug."""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
import pytest

from gateway.controlplane import providers
from tests.support.asgi import call, in_process
from tests.support.controlplane import CHAT, api, chat, create_key
from tests.support.inprocess import start_in_process
from tests.support.servers import ADMIN_KEY

SECRET = "sk-slug-secret-0123456789abcdef"


def make_slug(server, admin: dict, base: str, slug: str = "main", **fields) -> dict:
    body = {"slug": slug, "provider": "vendorA", "api_key": SECRET, "custom_host": base + "/v1", **fields}
    resp = api(server, "POST", "/v1/providers", body, admin["key"])
    assert resp.status == 201, resp.text
    return resp.json()


def sent_authorization(mock, base: str) -> str:
    return mock.calls(base)["requests"][-1]["headers"]["authorization"]


def test_create_masks_secrets_and_lists_gets_deletes(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    record = make_slug(gateway, admin, base, "my-openai", name="Production", vendorA_organization="org-1")
    assert record["id"] == record["slug"] == "my-openai" and record["object"] == "provider"
    assert record["provider"] == "vendorA" and record["name"] == "Production"
    assert record["custom_host"] == base + "/v1" and record["vendorA_organization"] == "org-1"
    assert record["api_key"] == "sk-****cdef" and SECRET not in msgspec.json.encode(record).decode()
    assert record["workspace_id"] == admin["workspace_id"]
    listed = api(gateway, "GET", "/v1/providers", key=admin["key"]).json()
    assert listed["object"] == "list" and listed["total"] == 1 and listed["data"][0]["slug"] == "my-openai"
    got = api(gateway, "GET", "/v1/providers/@my-openai", key=admin["key"])
    assert got.status == 200 and got.json()["api_key"] == "sk-****cdef"
    assert api(gateway, "POST", "/v1/providers", {"slug": "my-openai", "provider": "anthropic"},
               admin["key"]).status == 409
    gone = api(gateway, "DELETE", "/v1/providers/my-openai", key=admin["key"])
    assert gone.status == 200 and gone.json()["deleted"] is True
    assert api(gateway, "GET", "/v1/providers/my-openai", key=admin["key"]).status == 404
    resp = chat(gateway, admin["key"], **{"x-gateway-provider": "@my-openai"})
    assert resp.status == 400 and resp.json()["error"]["param"] == "x-gateway-provider"


@pytest.mark.parametrize("body, param", [
    ({"provider": "vendorA"}, "slug"),
    ({"slug": "bad slug", "provider": "vendorA"}, "slug"),
    ({"slug": "ok"}, "provider"),
    ({"slug": "ok", "provider": "nosuch"}, "provider"),
    ({"slug": "ok", "provider": "@other"}, "provider"),
    ({"slug": "ok", "provider": "vendorA", "custom_host": "ftp://example.com"}, "custom_host"),
    ({"slug": "ok", "provider": "vendorA", "custom_host": "https://example.com/v1?tenant=a"}, "custom_host"),
    ({"slug": "ok", "provider": "vendorA", "api_key": ""}, "api_key"),
    ({"slug": "ok", "provider": "vendorA", "api_key": 7}, "api_key"),
    ({"slug": "ok", "provider": "cloudB", "cloudB_deployment_type": "shared"}, "cloudB_deployment_type"),
    ({"slug": "ok", "provider": "vendorA", "retry": {"attempts": 1}}, "retry"),
])
def test_invalid_slugs_are_400s_naming_the_field(gateway, body, param):
    resp = api(gateway, "POST", "/v1/providers", body)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_a_slug_identifies_the_provider_in_every_spelling(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    make_slug(gateway, admin, base, "team")
    bearer = f"Bearer {SECRET}"
    spellings = [
        {"x-gateway-provider": "@team"},
        {"x-gateway-virtual-key": "team"},
        {"x-gateway-config": '{"provider": "@team"}'},
        {"x-gateway-config": '{"virtual_key": "team"}'},
        {"x-gateway-config": '{"retry": {"attempts": 1}}', "x-gateway-provider": "@team"},
        {"x-gateway-config": msgspec.json.encode({"strategy": {"mode": "fallback"}, "targets": [
            {"provider": "@team", "override_params": {"model": "from-target"}}]}).decode()},
    ]
    for headers in spellings:
        resp = chat(gateway, admin["key"], **headers)
        assert resp.status == 200, (headers, resp.text)
        assert sent_authorization(mock, base) == bearer, headers
    assert msgspec.json.decode(mock.calls(base)["requests"][-1]["body"])["model"] == "from-target"


def test_a_config_node_keeps_the_keys_it_sets_itself(gateway, mock):
    admin = create_key(gateway)
    slug_base, own_base = mock.scenario(), mock.scenario()
    make_slug(gateway, admin, slug_base, "team", vendorA_organization="org-slug")
    config = {"provider": "@team", "api_key": "sk-own", "vendorA_organization": "org-own",
              "custom_host": own_base + "/v1"}
    resp = chat(gateway, admin["key"], **{"x-gateway-config": msgspec.json.encode(config).decode()})
    assert resp.status == 200
    assert mock.calls(own_base)["calls"] == 1 and mock.calls(slug_base)["calls"] == 0
    sent = mock.calls(own_base)["requests"][-1]["headers"]
    assert sent["authorization"] == "Bearer sk-own" and sent["openai-organization"] == "org-own"


def test_unknown_slugs_are_400s_naming_where(gateway, mock):
    admin = create_key(gateway)
    cases = [
        ({"x-gateway-provider": "@nope"}, "x-gateway-provider"),
        ({"x-gateway-virtual-key": "nope"}, "x-gateway-virtual-key"),
        ({"x-gateway-config": '{"strategy": {"mode": "fallback"}, "targets": [{"provider": "@nope"}]}'},
         "targets[0].provider"),
    ]
    for headers, param in cases:
        resp = chat(gateway, admin["key"], **headers)
        assert resp.status == 400, resp.text
        assert resp.json()["error"]["param"] == param
        assert "@nope" in resp.json()["error"]["message"]


def test_updates_change_requests_at_once_and_null_removes_a_key(gateway, mock):
    admin = create_key(gateway)
    old_base, new_base = mock.scenario(), mock.scenario()
    make_slug(gateway, admin, old_base, "moving")
    assert chat(gateway, admin["key"], **{"x-gateway-provider": "@moving"}).status == 200
    new_secret = "sk-new-host-secret-0123456789wxyz"
    resp = api(gateway, "PUT", "/v1/providers/moving", {"custom_host": new_base + "/v1", "name": "moved",
                                                         "api_key": new_secret}, admin["key"])
    assert resp.status == 200
    assert resp.json()["custom_host"] == new_base + "/v1" and resp.json()["api_key"] == "sk-****wxyz"
    assert chat(gateway, admin["key"], **{"x-gateway-provider": "@moving"}).status == 200
    assert mock.calls(new_base)["calls"] == 1
    assert sent_authorization(mock, new_base) == f"Bearer {new_secret}"  # the key sent with the move
    removed = api(gateway, "PUT", "/v1/providers/moving", {"api_key": None}, admin["key"]).json()
    assert "api_key" not in removed
    # without its key, the slug takes the request's bearer token
    assert chat(gateway, admin["key"], **{"x-gateway-provider": "@moving", "authorization": "Bearer sk-own"}
                ).status == 200
    assert sent_authorization(mock, new_base) == "Bearer sk-own"
    renamed = api(gateway, "PUT", "/v1/providers/moving", {"slug": "other"}, admin["key"])
    assert renamed.status == 400 and renamed.json()["error"]["param"] == "slug"
    assert api(gateway, "PUT", "/v1/providers/absent", {"name": "x"}, admin["key"]).status == 404


def test_one_workspace_never_sees_or_uses_anothers_slugs(gateway, mock):
    first, second = create_key(gateway), create_key(gateway)
    make_slug(gateway, first, mock.scenario(), "private")
    assert api(gateway, "GET", "/v1/providers/private", key=second["key"]).status == 404
    assert api(gateway, "DELETE", "/v1/providers/private", key=second["key"]).status == 404
    assert api(gateway, "GET", "/v1/providers", key=second["key"]).json()["total"] == 0
    resp = chat(gateway, second["key"], **{"x-gateway-provider": "@private"})
    assert resp.status == 400
    # the same slug name in the second workspace is its own record
    own = mock.scenario()
    make_slug(gateway, second, own, "private", api_key="sk-second-workspace-key-000")
    assert chat(gateway, second["key"], **{"x-gateway-provider": "@private"}).status == 200
    assert sent_authorization(mock, own) == "Bearer sk-second-workspace-key-000"


def test_secrets_are_encrypted_at_rest_and_survive_a_restart(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-slugs-")
    base = mock.scenario()
    server = start_in_process(data_dir=data_dir)
    try:
        admin = create_key(server)
        make_slug(server, admin, base, "kept", cloudA_secret_access_key="aws-secret-value-1234567890")
    finally:
        server.stop()
    stored = b"".join(p.read_bytes() for p in Path(data_dir).glob("state.db*"))
    assert b"kept" in stored  # the record is there...
    assert SECRET.encode() not in stored and b"aws-secret-value" not in stored  # ...its secrets are not
    assert (Path(data_dir) / "secret.key").stat().st_mode & 0o077 == 0
    server = start_in_process(data_dir=data_dir)
    try:
        assert chat(server, admin["key"], **{"x-gateway-provider": "@kept"}).status == 200
        assert sent_authorization(mock, base) == f"Bearer {SECRET}"
    finally:
        server.stop()
    # another secret key cannot open them: the error says which setting to align
    server = start_in_process({"GATEWAY_SECRET_KEY": "a-different-key"}, data_dir=data_dir)
    try:
        resp = chat(server, admin["key"], **{"x-gateway-provider": "@kept"})
        assert resp.status == 500
        error = resp.json()["error"]
        assert "GATEWAY_SECRET_KEY" in error["message"]
        assert error["code"] == "record_unusable" and error["param"] == "provider"
    finally:
        server.stop()


BREAKS = ["\r", "\n", "\x00", "\r\nx-injected: 1"]


@pytest.mark.parametrize("field", ["api_key", "vendorA_organization", "vendorA_project", "cloudA_session_token",
                                   "cloudB_api_version"])
@pytest.mark.parametrize("brk", BREAKS)
def test_a_line_break_or_nul_in_a_header_bound_field_is_refused_at_create_and_update(gateway, mock, field, brk):
    admin = create_key(gateway)
    body = {"slug": "broken", "provider": "vendorA", field: f"value{brk}tail"}
    resp = api(gateway, "POST", "/v1/providers", body, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == field, resp.text
    assert "CR, LF or NUL" in resp.json()["error"]["message"]
    assert api(gateway, "GET", "/v1/providers/broken", key=admin["key"]).status == 404
    make_slug(gateway, admin, mock.scenario(), "fine")
    resp = api(gateway, "PUT", "/v1/providers/fine", {field: f"value{brk}"}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == field, resp.text
    # nothing was stored: the workspace's models list and the slug still work
    assert api(gateway, "GET", "/v1/models", key=admin["key"]).status == 200
    assert api(gateway, "GET", "/v1/providers/fine", key=admin["key"]).json()["api_key"] == "sk-****cdef"


def test_a_line_break_in_a_deployment_is_named_by_its_index(gateway):
    admin = create_key(gateway)
    deployments = [{"deployment_id": "d1", "alias": "a", "api_version": "v"},
                   {"deployment_id": "d2", "alias": "b\nc", "api_version": "v"}]
    resp = api(gateway, "POST", "/v1/providers", {"slug": "dep", "provider": "cloudB", "deployments": deployments},
               admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "deployments[1].alias", resp.text


@pytest.mark.parametrize("move", [
    {"custom_host": "NEW/v1"},
    {"custom_host": None},
    {"provider": "groq"},
])
def test_a_slug_moved_to_another_host_never_takes_its_stored_key_there(gateway, mock, move):
    admin = create_key(gateway)
    old_base, new_base = mock.scenario(), mock.scenario()
    make_slug(gateway, admin, old_base, "moving")
    change = {k: (v.replace("NEW", new_base) if isinstance(v, str) else v) for k, v in move.items()}
    field = next(iter(change))
    refused = api(gateway, "PUT", "/v1/providers/moving", change, admin["key"])
    assert refused.status == 400 and refused.json()["error"]["param"] == field, refused.text
    assert "api_key" in refused.json()["error"]["message"]
    # nothing changed: the slug still calls its own host with its own key
    shown = api(gateway, "GET", "/v1/providers/moving", key=admin["key"]).json()
    assert shown["custom_host"] == old_base + "/v1" and shown["provider"] == "vendorA"
    assert chat(gateway, admin["key"], **{"x-gateway-provider": "@moving"}).status == 200
    assert sent_authorization(mock, old_base) == f"Bearer {SECRET}"
    # moving while removing the key: the new host never sees the old key
    moved = api(gateway, "PUT", "/v1/providers/moving", {"custom_host": new_base + "/v1", "api_key": None},
                admin["key"])
    assert moved.status == 200 and "api_key" not in moved.json(), moved.text
    assert chat(gateway, admin["key"], **{"x-gateway-provider": "@moving", "authorization": "Bearer sk-caller"}
                ).status == 200
    sent = mock.calls(new_base)["requests"]
    assert len(sent) == 1 and SECRET not in str(sent[0]["headers"])
    assert sent[0]["headers"]["authorization"] == "Bearer sk-caller"
    # a change that is not a move (a name, the same host again) keeps the key
    same = api(gateway, "PUT", "/v1/providers/moving", {"name": "renamed", "custom_host": new_base + "/v1"},
               admin["key"])
    assert same.status == 200, same.text


async def test_a_slug_stored_with_a_line_break_before_the_rule_is_a_clear_error_and_spares_the_models_list(mock):
    async with in_process() as app:
        records = app.runtime.records
        fine = providers.build(records.box, "default", "legacy", {"provider": "vendorA", "api_key": SECRET,
                                                                  "custom_host": mock.scenario() + "/v1"})
        # as an older release stored it (the door refuses such a value now)
        legacy = msgspec.structs.replace(fine, settings={**fine.settings, "vendorA_organization": "org\r\nx: y"})
        await records.slugs.create(legacy)
        used = await call(app, "POST", "/v1/chat/completions", CHAT,
                          {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "@legacy",
                           "content-type": "application/json"})
        error = used.json()["error"]
        assert used.status == 500 and error["code"] == "record_unusable", used.text
        assert "vendorA_organization" in error["message"] and "PUT /v1/providers/legacy" in error["message"]
        listed = await call(app, "GET", "/v1/models", b"", {"x-gateway-api-key": ADMIN_KEY})
        assert listed.status == 200, listed.text
        assert any(e["source"] == "@legacy" and "vendorA_organization" in e["message"]
                   for e in listed.json()["errors"])
        # sending the value again mends it
        mended = await call(app, "PUT", "/v1/providers/legacy", {"vendorA_organization": "org-1"},
                            {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"})
        assert mended.status == 200, mended.text
        assert (await call(app, "POST", "/v1/chat/completions", CHAT,
                           {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "@legacy",
                            "content-type": "application/json"})).status == 200
