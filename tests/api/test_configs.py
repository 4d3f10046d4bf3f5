"""``/v1/configs`` (saved configs) through the real gateway: validation, use by id, updates on every worker."""

from __future__ import annotations

import tempfile
import time

import msgspec
import pytest

from tests.support.controlplane import api, chat, create_key
from tests.support.inprocess import start_in_process
from tests.support.servers import start_gateway

#: updates reach every worker within a second; the rest is room for a slow machine
UPDATE_WITHIN_S = 1.5


def target(base: str, **extra) -> dict:
    return {"provider": "vendorA", "api_key": "sk-saved", "custom_host": base + "/v1", **extra}


def save(server, admin: dict, config: dict, name: str = "saved") -> dict:
    resp = api(server, "POST", "/v1/configs", {"name": name, "config": config}, admin["key"])
    assert resp.status == 201, resp.text
    return resp.json()


def test_create_get_list_update_delete_and_use_by_id(gateway, mock):
    admin = create_key(gateway)
    first, second = mock.scenario(), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [target(first), target(second)]}
    record = save(gateway, admin, config, "fallback pair")
    assert record["id"].startswith("pc-") and record["object"] == "config"
    shown = {**config, "targets": [{**t, "api_key": "********"} for t in config["targets"]]}  # secrets masked
    assert record["config"] == shown and record["name"] == "fallback pair"
    assert record["workspace_id"] == admin["workspace_id"]
    resp = chat(gateway, admin["key"], **{"x-gateway-config": record["id"]})
    assert resp.status == 200 and resp.headers["x-gateway-last-used-option-index"] == "config.targets[0]"
    got = api(gateway, "GET", f"/v1/configs/{record['id']}", key=admin["key"]).json()
    assert got["config"] == shown
    listed = api(gateway, "GET", "/v1/configs", key=admin["key"]).json()
    assert listed["total"] == 1 and listed["data"][0]["id"] == record["id"]
    updated = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": target(second)}, admin["key"])
    assert updated.status == 200 and updated.json()["name"] == "fallback pair"
    assert updated.json()["last_updated_at"] >= record["last_updated_at"]
    resp = chat(gateway, admin["key"], **{"x-gateway-config": record["id"]})
    assert resp.status == 200 and resp.headers["x-gateway-last-used-option-index"] == "config"
    assert mock.calls(second)["calls"] == 1
    deleted = api(gateway, "DELETE", f"/v1/configs/{record['id']}", key=admin["key"])
    assert deleted.status == 200 and deleted.json() == {"id": record["id"], "object": "config", "deleted": True}
    resp = chat(gateway, admin["key"], **{"x-gateway-config": record["id"]})
    assert resp.status == 400 and resp.json()["error"]["param"] == "x-gateway-config"
    assert api(gateway, "GET", f"/v1/configs/{record['id']}", key=admin["key"]).status == 404


@pytest.mark.parametrize("body, param", [
    ({"config": {"retry": {"attempts": 1}}}, "name"),
    ({"name": "x"}, "config"),
    ({"name": "x", "config": None}, "config"),
    ({"name": "x", "config": {"retry": {"attempts": 99}}}, "config.retry.attempts"),
    ({"name": "x", "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "vendorA"}]}},
     "config.targets[0]"),
    ({"name": "x", "config": {"nonsense": 1}}, "config.nonsense"),
    ({"name": "x", "config": []}, "config"),
    ({"name": "", "config": {"retry": {"attempts": 1}}}, "name"),
])
def test_invalid_configs_are_400s_with_the_json_path(gateway, body, param):
    resp = api(gateway, "POST", "/v1/configs", body)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_updates_are_validated_too(gateway, mock):
    admin = create_key(gateway)
    record = save(gateway, admin, target(mock.scenario()))
    resp = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": {"cache": {"mode": "never"}}},
               admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "config.cache.mode"
    assert api(gateway, "PUT", f"/v1/configs/{record['id']}", {}, admin["key"]).status == 400


def test_header_values_complete_a_saved_config(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    record = save(gateway, admin, {"provider": "vendorA", "custom_host": base + "/v1"})
    resp = chat(gateway, admin["key"], **{"x-gateway-config": record["id"], "authorization": "Bearer sk-header"})
    assert resp.status == 200
    assert mock.calls(base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-header"


def test_a_saved_config_may_name_slugs(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    slug = {"slug": "saved-slug", "provider": "vendorA", "api_key": "sk-from-slug", "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    record = save(gateway, admin, {"strategy": {"mode": "single"}, "targets": [{"provider": "@saved-slug"}]})
    assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
    assert mock.calls(base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-from-slug"


def test_a_saved_config_naming_an_unknown_slug_is_a_400_and_a_deleted_slug_stops_it(gateway, mock):
    admin, other = create_key(gateway), create_key(gateway)
    base = mock.scenario()
    slug = {"slug": "kept", "provider": "vendorA", "api_key": "sk-from-slug", "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, other["key"]).status == 201  # another workspace's
    for config, param in (({"provider": "@kept"}, "config.provider"),
                          ({"virtual_key": "kept"}, "config.virtual_key"),
                          ({"strategy": {"mode": "fallback"}, "targets": [{"provider": "@kept"}]},
                           "config.targets[0].provider")):
        resp = api(gateway, "POST", "/v1/configs", {"name": "x", "config": config}, admin["key"])
        assert resp.status == 400, resp.text
        assert resp.json()["error"]["param"] == param and "@kept" in resp.json()["error"]["message"]
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    record = save(gateway, admin, {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@kept"}]})
    resp = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": {"provider": "@gone"}}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "config.provider"
    assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
    # deleting the slug later leaves the config saved; requests using it answer 400 naming where
    assert api(gateway, "DELETE", "/v1/providers/kept", key=admin["key"]).status == 200
    resp = chat(gateway, admin["key"], **{"x-gateway-config": record["id"]})
    assert resp.status == 400 and resp.json()["error"]["param"] == "targets[0].provider", resp.text
    assert api(gateway, "GET", f"/v1/configs/{record['id']}", key=admin["key"]).status == 200


def test_another_workspaces_config_is_unknown(gateway, mock):
    first, second = create_key(gateway), create_key(gateway)
    record = save(gateway, first, target(mock.scenario()))
    assert api(gateway, "GET", f"/v1/configs/{record['id']}", key=second["key"]).status == 404
    assert api(gateway, "PUT", f"/v1/configs/{record['id']}", {"name": "mine"}, second["key"]).status == 404
    resp = chat(gateway, second["key"], **{"x-gateway-config": record["id"]})
    assert resp.status == 400 and record["id"] in resp.json()["error"]["message"]


def last_target(server, admin: dict, config_id: str) -> set[str]:
    """Which target answered each of 20 requests on fresh connections (so both workers answer some)."""
    seen = set()
    for _ in range(20):
        resp = chat(server, admin["key"], **{"x-gateway-config": config_id})
        assert resp.status == 200, resp.text
        seen.add(resp.headers["x-gateway-last-used-option-index"])
    return seen


def test_an_update_reaches_every_worker_within_a_second(mock):
    server = start_gateway(workers=2)
    try:
        admin = create_key(server)
        a, b = mock.scenario(), mock.scenario()
        record = save(server, admin, {"strategy": {"mode": "fallback"}, "targets": [target(a), target(b)]})
        assert last_target(server, admin, record["id"]) == {"config.targets[0]"}
        swapped = {"strategy": {"mode": "fallback"}, "targets": [target(b), target(a, weight=1)], "name": "v2"}
        assert api(server, "PUT", f"/v1/configs/{record['id']}", {"config": swapped}, admin["key"]).status == 200
        time.sleep(UPDATE_WITHIN_S)
        assert last_target(server, admin, record["id"]) == {"config.targets[0]"}
        assert mock.calls(b)["calls"] == 20
    finally:
        server.stop()


def test_two_instances_on_one_redis_share_saved_configs_and_slugs(mock, shared_redis):
    first, second = start_in_process(shared_redis), start_in_process(shared_redis)
    try:
        admin = create_key(first)
        a, b = mock.scenario(), mock.scenario()
        slug = {"slug": "both", "provider": "vendorA", "api_key": "sk-shared-slug", "custom_host": a + "/v1"}
        assert api(first, "POST", "/v1/providers", slug, admin["key"]).status == 201
        record = save(first, admin, {"provider": "@both"})
        assert chat(second, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
        assert mock.calls(a)["requests"][-1]["headers"]["authorization"] == "Bearer sk-shared-slug"
        config = msgspec.json.encode(target(b)).decode()
        assert api(first, "PUT", f"/v1/configs/{record['id']}", {"config": msgspec.json.decode(config)},
                   admin["key"]).status == 200
        time.sleep(UPDATE_WITHIN_S)
        assert chat(second, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
        assert mock.calls(b)["calls"] == 1
    finally:
        first.stop()
        second.stop()


def test_saved_configs_survive_a_restart(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-configs-")
    base = mock.scenario()
    server = start_in_process(data_dir=data_dir)
    try:
        admin = create_key(server)
        record = save(server, admin, target(base))
    finally:
        server.stop()
    server = start_in_process(data_dir=data_dir)
    try:
        assert chat(server, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
        assert mock.calls(base)["calls"] == 1
    finally:
        server.stop()


def test_a_config_naming_an_unknown_or_foreign_guardrail_is_refused_as_a_request_would_refuse_it(gateway, mock):
    admin, other = create_key(gateway), create_key(gateway)
    rule = {"name": "short", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 50}}], "deny": True}
    mine = api(gateway, "POST", "/v1/guardrails", rule, admin["key"]).json()["id"]
    foreign = api(gateway, "POST", "/v1/guardrails", rule, other["key"]).json()["id"]
    base = mock.scenario()
    for missing in (foreign, "gr_nosuch"):
        config = {**target(base), "input_guardrails": [mine, missing]}
        sent = chat(gateway, admin["key"], **{"x-gateway-config": msgspec.json.encode(config).decode()})
        assert sent.status == 400 and sent.json()["error"]["param"] == "input_guardrails[1]", sent.text
        saved = api(gateway, "POST", "/v1/configs", {"name": "x", "config": config}, admin["key"])
        assert saved.status == 400, saved.text
        assert saved.json()["error"]["param"] == "config.input_guardrails[1]"
        assert saved.json()["error"]["message"] == sent.json()["error"]["message"]
        assert f"unknown guardrail '{missing}'" in saved.json()["error"]["message"]
        nested = {"strategy": {"mode": "fallback"},
                  "targets": [target(base), {**target(base), "output_guardrails": [{"id": missing}]}]}
        saved = api(gateway, "POST", "/v1/configs", {"name": "x", "config": nested}, admin["key"])
        assert saved.status == 400 and saved.json()["error"]["param"] == "config.targets[1].output_guardrails[0]"
    record = save(gateway, admin, {**target(base), "input_guardrails": [mine]})
    assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
    changed = api(gateway, "PUT", f"/v1/configs/{record['id']}",
                  {"config": {**target(base), "before_request_hooks": [{"id": foreign}]}}, admin["key"])
    assert changed.status == 400 and changed.json()["error"]["param"] == "config.before_request_hooks[0]"
    assert f"unknown guardrail '{foreign}'" in changed.json()["error"]["message"]
    # the root key saving into the other workspace (workspace_id) resolves the guardrails there
    other_ws = api(gateway, "POST", "/v1/configs",
                   {"name": "x", "workspace_id": other["workspace_id"], "config": {**target(base),
                                                                                 "input_guardrails": [foreign]}})
    assert other_ws.status == 201, other_ws.text


HOST = "http://placeholder.invalid"


@pytest.mark.parametrize("config, param", [
    ({"provider": "vendorA", "custom_host": HOST, "api_key": "sk-a\r\nx-injected: 1"}, "config.api_key"),
    ({"provider": "vendorA", "custom_host": HOST, "api_key": "sk", "vendorA_organization": "org\n"},
     "config.vendorA_organization"),
    ({"provider": "vendorA", "custom_host": HOST, "api_key": "sk", "vendorA_project": "p\x00"},
     "config.vendorA_project"),
    ({"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "custom_host": HOST, "api_key": "sk"},
        {"provider": "cloudA", "custom_host": HOST, "cloudA_access_key_id": "AKID\r",
         "cloudA_secret_access_key": "s"}]},
     "config.targets[1].cloudA_access_key_id"),
])
def test_a_line_break_or_nul_in_a_header_bound_value_is_refused_at_create_and_update(gateway, mock, config, param):
    admin = create_key(gateway)
    base = mock.scenario()
    config = msgspec.json.decode(msgspec.json.encode(config).replace(HOST.encode(), base.encode()))
    resp = api(gateway, "POST", "/v1/configs", {"name": "broken", "config": config}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == param, resp.text
    assert "CR, LF or NUL" in resp.json()["error"]["message"]
    record = save(gateway, admin, target(mock.scenario()))
    resp = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": config}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == param, resp.text
    # and the same config sent with a request is the same 400, before any upstream call
    resp = chat(gateway, admin["key"], **{"x-gateway-config": msgspec.json.encode(config).decode()})
    assert resp.status == 400 and resp.json()["error"]["param"] == param.removeprefix("config."), resp.text
    assert mock.calls(base)["calls"] == 0


def test_a_saved_config_moved_to_another_host_never_takes_its_stored_key_there(gateway, mock):
    admin = create_key(gateway)
    old_base, other_base, new_base = mock.scenario(), mock.scenario(), mock.scenario()
    config = {"strategy": {"mode": "fallback"}, "targets": [target(old_base), target(other_base)]}
    record = save(gateway, admin, config)
    shown = api(gateway, "GET", f"/v1/configs/{record['id']}", key=admin["key"]).json()["config"]
    # the config read back, its first target pointed elsewhere: the masked key may not follow it
    moved = {**shown, "targets": [{**shown["targets"][0], "custom_host": new_base + "/v1"}, shown["targets"][1]]}
    refused = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": moved}, admin["key"])
    assert refused.status == 400 and refused.json()["error"]["param"] == "config.targets[0].api_key", refused.text
    # a root custom_host the targets inherit moves every key under it
    inherited = {**shown, "custom_host": new_base + "/v1",
                 "targets": [{k: v for k, v in t.items() if k != "custom_host"} for t in shown["targets"]]}
    refused = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": inherited}, admin["key"])
    assert refused.status == 400 and refused.json()["error"]["param"].endswith("].api_key"), refused.text
    assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
    assert mock.calls(old_base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-saved"
    # the same move with the key sent again is fine; the untouched target keeps its masked key
    fresh = {**moved, "targets": [{**moved["targets"][0], "api_key": "sk-fresh"}, moved["targets"][1]]}
    accepted = api(gateway, "PUT", f"/v1/configs/{record['id']}", {"config": fresh}, admin["key"])
    assert accepted.status == 200, accepted.text
    assert chat(gateway, admin["key"], **{"x-gateway-config": record["id"]}).status == 200
    sent = mock.calls(new_base)["requests"]
    assert len(sent) == 1 and sent[0]["headers"]["authorization"] == "Bearer sk-fresh"
    assert "sk-saved" not in str(sent[0])
