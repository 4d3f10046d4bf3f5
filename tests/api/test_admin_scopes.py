"""Admin routes have scopes, through the real gateway: ``<family>.read`` for a record family's GETs and
``<family>.write`` for what changes it, besides the admin role (docs/control-plane.md, "Scopes"). An admin key
narrowed to ``models.read`` changes and lists nothing; a key with a family's scopes manages that family and no
other; keys made with the defaults before the admin scopes existed keep every route."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.controlplane.keys import ApiKeys
from tests.support.asgi import call, in_process
from tests.support.controlplane import api, create_key

RULE = {"name": "short", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 50}}], "deny": True}
TEMPLATE = {"name": "greeter", "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello {{name}}!"}]}
# limits no request reaches: the workspace is the test's own anyway
USAGE = {"name": "cost", "conditions": [{"key": "workspace_id", "value": "*"}], "group_by": [{"key": "api_key"}],
         "type": "cost", "credit_limit": 1000}
RATE = {"name": "rpm", "conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}],
        "type": "requests", "unit": "rpm", "value": 1_000_000}


def families(host: str) -> dict[str, tuple[str, dict, dict]]:
    """collection path -> (scope family, a create body, an update body)."""
    slug = {"slug": "team", "name": "Team", "provider": "vendorA", "api_key": "sk-team", "custom_host": host}
    config = {"name": "saved", "config": {"provider": "vendorA", "api_key": "sk-saved", "custom_host": host}}
    return {
        "/v1/providers": ("providers", slug, {"name": "renamed"}),
        "/v1/configs": ("configs", config, {"name": "renamed"}),
        "/v1/prompts": ("prompts", TEMPLATE, {"name": "renamed"}),
        "/v1/guardrails": ("guardrails", RULE, {"name": "renamed"}),
        "/v1/policies/usage-limits": ("policies", USAGE, {"name": "renamed"}),
        "/v1/policies/rate-limits": ("policies", RATE, {"name": "renamed"}),
    }


def record_id(path: str, record: dict) -> str:
    return str(record["slug"] if path == "/v1/providers" else record["id"])


def lacks(resp: Any, scope: str) -> None:
    assert resp.status == 403, resp.text
    error = resp.json()["error"]
    assert error["code"] == "missing_scope" and error["type"] == "permission_error", error
    assert f"'{scope}'" in error["message"] and error["param"] == "x-gateway-api-key", error


def test_an_admin_key_narrowed_to_models_read_changes_and_lists_nothing(gateway, mock):
    """The issue's key: it may list models, and gets 403 missing_scope on every admin change and on listing keys;
    nothing changes."""
    host = mock.scenario() + "/v1"
    narrow = create_key(gateway, "admin", scopes=["models.read"])
    workspace, key = narrow["workspace_id"], narrow["key"]
    for path, (family, body, update) in families(host).items():
        lacks(api(gateway, "POST", path, body, key), f"{family}.write")
        made = api(gateway, "POST", path, {**body, "workspace_id": workspace})  # by the root key
        assert made.status in (200, 201), made.text
        one = f"{path}/{record_id(path, made.json())}"
        lacks(api(gateway, "PUT", one, update, key), f"{family}.write")
        lacks(api(gateway, "DELETE", one, key=key), f"{family}.write")
        lacks(api(gateway, "GET", path, key=key), f"{family}.read")
        lacks(api(gateway, "GET", one, key=key), f"{family}.read")
        after = api(gateway, "GET", f"{one}?workspace_id={workspace}")
        assert after.status == 200 and after.json()["name"] == body["name"], after.text  # unchanged
        assert after.json().get("status", "active") == "active"
    lacks(api(gateway, "GET", "/v1/api-keys", key=key), "keys.read")
    lacks(api(gateway, "GET", f"/v1/api-keys/{narrow['id']}", key=key), "keys.read")
    lacks(api(gateway, "POST", "/v1/api-keys", {"name": "x", "role": "member", "scopes": []}, key), "keys.write")
    models = api(gateway, "GET", "/v1/models", key=key)
    assert models.status == 200 and {m["slug"] for m in models.json()["data"]} == {"team"}, models.text


def test_a_key_with_a_familys_scopes_manages_that_family_and_no_other(gateway, mock):
    host = mock.scenario() + "/v1"
    table = families(host)
    for path, (family, body, update) in table.items():
        owner = create_key(gateway, "admin", scopes=[f"{family}.read", f"{family}.write"])
        key = owner["key"]
        made = api(gateway, "POST", path, body, key)
        assert made.status in (200, 201), (path, made.text)
        one = f"{path}/{record_id(path, made.json())}"
        assert api(gateway, "GET", one, key=key).status == 200
        listed = api(gateway, "GET", path, key=key)
        assert listed.status == 200 and listed.json()["total"] == 1, listed.text
        changed = api(gateway, "PUT", one, update, key)
        assert changed.status == 200 and changed.json()["name"] == "renamed", (path, changed.text)
        assert api(gateway, "DELETE", one, key=key).status == 200
        # a reader reads and changes nothing
        reader = create_key(gateway, "admin", owner["workspace_id"], scopes=[f"{family}.read"])
        assert api(gateway, "GET", path, key=reader["key"]).status == 200
        lacks(api(gateway, "POST", path, body, reader["key"]), f"{family}.write")
        # and the family's scopes open no other family
        for other_path, (other_family, _, _) in table.items():
            if other_family != family:
                lacks(api(gateway, "GET", other_path, key=key), f"{other_family}.read")


def test_keys_read_lists_keys_and_keys_write_makes_them_within_its_own_scopes(gateway):
    reader = create_key(gateway, "admin", scopes=["keys.read"])
    workspace = reader["workspace_id"]
    listed = api(gateway, "GET", "/v1/api-keys", key=reader["key"])
    assert listed.status == 200 and [k["id"] for k in listed.json()["data"]] == [reader["id"]]
    lacks(api(gateway, "POST", "/v1/api-keys", {"name": "x", "role": "member", "scopes": []}, reader["key"]),
          "keys.write")
    writer = create_key(gateway, "admin", workspace, scopes=["keys.write", "providers.read"])
    child = create_key(gateway, "admin", workspace, writer["key"], scopes=["providers.read"])
    assert child["scopes"] == ["providers.read"]
    wider = api(gateway, "POST", "/v1/api-keys", {"name": "x", "role": "admin", "scopes": ["providers.write"]},
                writer["key"])
    assert wider.status == 403 and wider.json()["error"]["param"] == "scopes", wider.text  # check_grant
    assert "'providers.write'" in wider.json()["error"]["message"]


def test_metrics_needs_a_root_key_holding_metrics_read(gateway):
    full_admin = create_key(gateway, "admin")  # every scope, but not root
    resp = api(gateway, "GET", "/metrics", key=full_admin["key"])
    assert resp.status == 403 and resp.json()["error"]["code"] == "missing_role", resp.text
    assert api(gateway, "GET", "/metrics").status == 200  # the root key, as x-gateway-api-key


async def _stored_before_admin_scopes(store: Any, workspace: str, scopes: list[str]) -> str:
    """An admin key as a release before the admin scopes stored it (no scopes_version); its secret."""
    keys = ApiKeys(store)
    record, secret = await keys.create(name="old", role="admin", workspace=workspace, scopes=scopes)
    old = msgspec.structs.replace(record, scopes_version=0)
    await keys.repo.replace(old)
    await keys._put_principal(old)
    return secret


async def test_admin_keys_made_with_the_old_defaults_keep_every_admin_route_and_narrowed_ones_do_not():
    old_defaults = ["inference", "prompts.run", "models.read", "logs.read", "guardrails.invoke", "agents.invoke"]
    async with in_process({"GATEWAY_LOG_FILE": "off"}) as app:
        store = app.runtime.store
        full = await _stored_before_admin_scopes(store, "old-ws", old_defaults)
        narrow = await _stored_before_admin_scopes(store, "old-ws", ["inference", "models.read"])

        async def ask(method: str, path: str, key: str, body: dict | None = None) -> Any:
            return await call(app, method, path, body or b"", {"x-gateway-api-key": key,
                                                              "content-type": "application/json"})

        made = await ask("POST", "/v1/providers", full, {"slug": "old", "provider": "vendorA", "api_key": "sk-old"})
        assert made.status == 201, made.text
        listed = await ask("GET", "/v1/api-keys", full)
        assert listed.status == 200, listed.text
        shown = {k["key_prefix"]: k["scopes"] for k in listed.json()["data"]}
        assert "providers.write" in shown[full[:10]] and "keys.write" in shown[full[:10]]  # as it holds them
        assert shown[narrow[:10]] == ["inference", "models.read"]
        lacks(await ask("GET", "/v1/providers", narrow), "providers.read")
        assert (await ask("GET", "/v1/models", narrow)).status == 200
