"""``/v1/api-keys`` through the real gateway: create, list, get, revoke, rotate; roles, scopes, workspaces."""

from __future__ import annotations

import pytest

from tests.support.controlplane import api, chat, create_key, new_workspace
from tests.support.servers import ADMIN_KEY


def test_create_answers_the_record_and_the_secret_once(gateway, mock):
    workspace = new_workspace()
    created = create_key(gateway, "member", workspace, scopes=["inference"])
    assert created["object"] == "api_key" and created["id"].startswith("gk-")
    assert created["workspace_id"] == workspace and created["organisation_id"] == "default"
    assert created["role"] == "member" and created["scopes"] == ["inference"]
    secret = created["key"]
    assert secret.startswith("gw-") and created["key_prefix"] == secret[:10]
    assert "key_hash" not in created
    # the secret works on the data plane at once, and is never shown again
    assert chat(gateway, secret, mock.scenario()).status == 200
    listed = api(gateway, "GET", f"/v1/api-keys?workspace_id={workspace}")
    assert listed.status == 200
    doc = listed.json()
    assert doc["object"] == "list" and doc["total"] == 1
    assert [k["id"] for k in doc["data"]] == [created["id"]]
    assert "key" not in doc["data"][0] and "key_hash" not in doc["data"][0]
    got = api(gateway, "GET", f"/v1/api-keys/{created['id']}?workspace_id={workspace}").json()
    assert got["name"] == created["name"] and "key" not in got


def test_revoked_keys_get_401_and_unknown_ids_404(gateway, mock):
    admin = create_key(gateway, "admin")
    member = create_key(gateway, "member", admin["workspace_id"])
    base = mock.scenario()
    assert chat(gateway, member["key"], base).status == 200
    resp = api(gateway, "DELETE", f"/v1/api-keys/{member['id']}", key=admin["key"])
    assert resp.status == 200 and resp.json() == {"id": member["id"], "object": "api_key", "deleted": True}
    refused = chat(gateway, member["key"], base)
    assert refused.status == 401
    assert refused.json()["error"]["param"] == "x-gateway-api-key"
    assert api(gateway, "GET", f"/v1/api-keys/{member['id']}", key=admin["key"]).status == 404
    assert api(gateway, "DELETE", f"/v1/api-keys/{member['id']}", key=admin["key"]).status == 404


def test_member_keys_use_the_data_plane_but_get_403_on_admin_routes(gateway, mock):
    member = create_key(gateway, "member")
    assert chat(gateway, member["key"], mock.scenario()).status == 200
    for method, path, body in (
        ("GET", "/v1/api-keys", None),
        ("POST", "/v1/api-keys", {"name": "x", "role": "admin"}),
        ("DELETE", f"/v1/api-keys/{member['id']}", None),
        ("GET", "/v1/providers", None),
        ("POST", "/v1/configs", {"name": "c", "config": {"retry": {"attempts": 1}}}),
        ("GET", "/v1/prompts", None),
    ):
        resp = api(gateway, method, path, body, member["key"])
        assert resp.status == 403, (method, path, resp.text)
        assert resp.json()["error"]["type"] == "permission_error"


def test_one_workspace_never_sees_anothers_keys(gateway):
    first = create_key(gateway, "admin")
    second = create_key(gateway, "admin")
    # the other workspace's key id is a 404, exactly like a missing one
    assert api(gateway, "GET", f"/v1/api-keys/{second['id']}", key=first["key"]).status == 404
    assert api(gateway, "DELETE", f"/v1/api-keys/{second['id']}", key=first["key"]).status == 404
    listed = api(gateway, "GET", "/v1/api-keys", key=first["key"]).json()
    assert [k["id"] for k in listed["data"]] == [first["id"]]
    # a non-root admin cannot act in (or create keys for) another workspace
    assert api(gateway, "GET", f"/v1/api-keys?workspace_id={second['workspace_id']}", key=first["key"]).status == 404
    resp = api(gateway, "POST", "/v1/api-keys", {"name": "x", "workspace_id": second["workspace_id"]}, first["key"])
    assert resp.status == 404 and resp.json()["error"]["param"] == "workspace_id"


def test_role_defaults_to_member_and_scopes_to_the_roles_defaults(gateway):
    workspace = new_workspace()
    resp = api(gateway, "POST", "/v1/api-keys", {"name": "plain", "workspace_id": workspace})
    assert resp.status == 201
    assert resp.json()["role"] == "member"
    assert resp.json()["scopes"] == ["inference", "prompts.run", "models.read", "logs.read", "guardrails.invoke",
                                     "agents.invoke", "mcp.invoke"]
    admin = create_key(gateway, "admin", workspace)
    # an admin key made with the defaults holds every scope: the data plane's and each admin family's
    assert set(admin["scopes"]) == {"inference", "prompts.run", "models.read", "logs.read", "guardrails.invoke",
                                     "agents.invoke", "mcp.invoke", "metrics.read", *(f"{family}.{access}" for family
                                     in ("keys", "providers", "configs", "prompts", "policies", "guardrails",
                                         "mcp-servers", "agents") for access in ("read", "write"))}


def test_a_key_without_the_inference_scope_gets_403_on_inference(gateway, mock):
    narrow = create_key(gateway, "member", scopes=["models.read"])
    resp = chat(gateway, narrow["key"], mock.scenario())
    assert resp.status == 403
    assert resp.json()["error"]["code"] == "missing_scope"
    assert "inference" in resp.json()["error"]["message"]


@pytest.mark.parametrize("given, days", [(1, 1), (365, 365), ("weekly", 7), ("monthly", 30), ("Weekly", 7)])
def test_rotation_period_in_days_with_weekly_and_monthly_normalised(gateway, given, days):
    created = create_key(gateway, "member", rotation_period=given)
    assert created["rotation_period"] == days
    assert created["rotation_due"] > created["created_at"]


@pytest.mark.parametrize("body, param", [
    ({"role": "member"}, "name"),
    ({"name": ""}, "name"),
    ({"name": "n", "role": "owner"}, "role"),
    ({"name": "n", "scopes": ["inference", "everything"]}, "scopes[1]"),
    ({"name": "n", "rotation_period": 0}, "rotation_period"),
    ({"name": "n", "rotation_period": 366}, "rotation_period"),
    ({"name": "n", "rotation_period": "daily"}, "rotation_period"),
    ({"name": "n", "colour": "blue"}, "colour"),
])
def test_invalid_bodies_are_400s_naming_the_field(gateway, body, param):
    resp = api(gateway, "POST", "/v1/api-keys", body)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_rotate_issues_a_new_secret_and_the_old_one_stops(gateway, mock):
    admin = create_key(gateway, "admin")
    member = create_key(gateway, "member", admin["workspace_id"], rotation_period="weekly")
    base = mock.scenario()
    resp = api(gateway, "POST", f"/v1/api-keys/{member['id']}/rotate", key=admin["key"])
    assert resp.status == 200
    rotated = resp.json()
    assert rotated["id"] == member["id"] and rotated["key"] != member["key"]
    assert rotated["last_rotated_at"] >= member["last_rotated_at"]
    assert rotated["rotation_due"] >= member["rotation_due"]
    assert chat(gateway, member["key"], base).status == 401
    assert chat(gateway, rotated["key"], base).status == 200


def test_the_root_key_may_name_any_workspace_and_creates_it_by_naming_it(gateway):
    workspace = new_workspace()
    resp = api(gateway, "POST", "/v1/api-keys", {"name": "first", "role": "admin", "workspace_id": workspace})
    assert resp.status == 201 and resp.json()["workspace_id"] == workspace
    mine = api(gateway, "GET", "/v1/api-keys", key=resp.json()["key"]).json()
    assert mine["total"] == 1
    assert api(gateway, "GET", f"/v1/api-keys?workspace_id={workspace}", key=ADMIN_KEY).json()["total"] == 1


def test_paging_with_page_size_and_current_page(gateway):
    admin = create_key(gateway, "admin")
    for _ in range(4):
        create_key(gateway, "member", admin["workspace_id"])
    first = api(gateway, "GET", "/v1/api-keys?page_size=2&current_page=0", key=admin["key"]).json()
    last = api(gateway, "GET", "/v1/api-keys?page_size=2&current_page=2", key=admin["key"]).json()
    assert first["total"] == last["total"] == 5
    assert len(first["data"]) == 2 and len(last["data"]) == 1
    assert api(gateway, "GET", "/v1/api-keys?page_size=x", key=admin["key"]).json()["error"]["param"] == "page_size"


def test_files_and_batches_need_the_inference_scope(gateway):
    narrow = create_key(gateway, "member", scopes=["models.read"])
    for path in ("/v1/files", "/v1/batches"):
        resp = api(gateway, "GET", path, key=narrow["key"])
        assert resp.status == 403, (path, resp.text)
        assert resp.json()["error"]["code"] == "missing_scope"
    member = create_key(gateway, "member")
    assert api(gateway, "GET", "/v1/batches", key=member["key"]).status != 403


def test_a_key_with_an_mcp_tool_list_hands_out_only_tools_within_it(gateway):
    """``mcp_tools`` is shown on the key, checked entry by entry, and a key holding a list may create keys only with
    a list inside its own (no key grants more than it holds)."""
    made = api(gateway, "POST", "/v1/api-keys", {"name": "tools-lead", "role": "admin",
                                                  "mcp_tools": ["alpha", "beta/add"]})
    assert made.status == 201, made.text
    assert made.json()["mcp_tools"] == ["alpha", "beta/add"]
    lead = made.json()["key"]

    bad = api(gateway, "POST", "/v1/api-keys", {"name": "x", "mcp_tools": ["no spaces/allowed here"]})
    assert bad.status == 400 and bad.json()["error"]["param"] == "mcp_tools[0]"

    inside = api(gateway, "POST", "/v1/api-keys", {"name": "m1", "mcp_tools": ["alpha/echo", "beta/add"]}, key=lead)
    assert inside.status == 201, inside.text
    wider = api(gateway, "POST", "/v1/api-keys", {"name": "m2", "mcp_tools": ["beta"]}, key=lead)
    assert wider.status == 403 and wider.json()["error"]["param"] == "mcp_tools[0]"
    unlisted = api(gateway, "POST", "/v1/api-keys", {"name": "m3"}, key=lead)
    assert unlisted.status == 403 and unlisted.json()["error"]["param"] == "mcp_tools"
    plain = api(gateway, "POST", "/v1/api-keys", {"name": "m4"})
    assert "mcp_tools" not in plain.json()
