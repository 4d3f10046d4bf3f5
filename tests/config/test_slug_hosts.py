"""A provider slug's secrets go only to the host the slug defines: every way a request could point them elsewhere,
through the real gateway."""

from __future__ import annotations

import msgspec
import pytest

from tests.support.controlplane import api, chat, create_key

SECRET = "sk-slug-secret-0123456789abcdef"


def _config(doc: dict) -> dict[str, str]:
    return {"x-gateway-config": msgspec.json.encode(doc).decode()}


@pytest.fixture
def team(gateway, mock):
    """A workspace with the slugs ``team`` (vendorA, its api_key, its own host) and ``nohost`` (the same without a
    host: vendorA's default host), and an outside host."""
    admin = create_key(gateway)
    own, outside = mock.scenario(), mock.scenario()
    body = {"slug": "team", "provider": "vendorA", "api_key": SECRET, "custom_host": own + "/v1"}
    assert api(gateway, "POST", "/v1/providers", body, admin["key"]).status == 201
    body = {"slug": "nohost", "provider": "vendorA", "api_key": SECRET}
    assert api(gateway, "POST", "/v1/providers", body, admin["key"]).status == 201
    return {"key": admin["key"], "own": own, "outside": outside, "admin": admin}


def _refused(mock, team: dict, resp, param: str) -> None:
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and "@team" in error["message"] or "@nohost" in error["message"], error
    assert mock.calls(team["outside"])["calls"] == 0 and mock.calls(team["own"])["calls"] == 0


@pytest.mark.parametrize("make_config, param", [
    (lambda out: {"provider": "@team", "custom_host": out}, "custom_host"),
    (lambda out: {"virtual_key": "team", "custom_host": out}, "custom_host"),
    (lambda out: {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "sk-x", "custom_host": out},
        {"provider": "@team", "custom_host": out}]}, "targets[1].custom_host"),
    # a target inherits the parent's host (when its slug has none of its own)...
    (lambda out: {"custom_host": out, "strategy": {"mode": "fallback"}, "targets": [{"provider": "@nohost"}]},
     "custom_host"),
    # ...or the parent's slug, and sets its own host
    (lambda out: {"provider": "@team", "strategy": {"mode": "fallback"}, "targets": [{"custom_host": out}]},
     "targets[0].custom_host"),
    (lambda out: {"provider": "@nohost", "strategy": {"mode": "loadbalance"}, "targets": [
        {"weight": 1}, {"custom_host": out, "weight": 1}]}, "targets[1].custom_host"),
])
def test_a_config_cannot_send_a_slugs_secret_to_another_host(gateway, mock, team, make_config, param):
    config = make_config(team["outside"] + "/v1")
    resp = chat(gateway, team["key"], **_config(config))
    _refused(mock, team, resp, param)


def test_headers_cannot_send_a_slugs_secret_to_another_host(gateway, mock, team):
    outside = team["outside"] + "/v1"
    for headers in ({"x-gateway-provider": "@nohost"}, {"x-gateway-virtual-key": "nohost"}):
        resp = chat(gateway, team["key"], **headers, **{"x-gateway-custom-host": outside})
        _refused(mock, team, resp, "x-gateway-custom-host")
    # with a JSON config, the header fills the config's root
    resp = chat(gateway, team["key"], **_config({"provider": "@team"}), **{"x-gateway-custom-host": outside})
    _refused(mock, team, resp, "custom_host")
    # a slug's own host wins over the header (as every key the slug sets does)
    resp = chat(gateway, team["key"], **{"x-gateway-provider": "@team", "x-gateway-custom-host": outside})
    assert resp.status == 200 and mock.calls(team["own"])["calls"] == 1 and mock.calls(team["outside"])["calls"] == 0


def test_the_slugs_own_host_and_own_credentials_are_fine(gateway, mock, team):
    key, own, outside = team["key"], team["own"], team["outside"]
    # naming the slug's own host changes nothing
    resp = chat(gateway, key, **_config({"provider": "@team", "custom_host": own + "/v1"}))
    assert resp.status == 200, resp.text
    assert mock.calls(own)["requests"][-1]["headers"]["authorization"] == f"Bearer {SECRET}"
    # with credentials of its own the node does not use the slug's secret: any host will do
    resp = chat(gateway, key, **_config({"provider": "@team", "api_key": "sk-own", "custom_host": outside + "/v1"}))
    assert resp.status == 200, resp.text
    assert mock.calls(outside)["requests"][-1]["headers"]["authorization"] == "Bearer sk-own"
    resp = chat(gateway, key, **_config({"provider": "@team", "custom_host": outside + "/v1"}),
                authorization="Bearer sk-bearer")
    assert resp.status == 200, resp.text
    assert mock.calls(outside)["requests"][-1]["headers"]["authorization"] == "Bearer sk-bearer"
    # a slug without secrets (a self-hosted server) may be pointed anywhere
    bare = {"slug": "selfhosted", "provider": "vendorA", "custom_host": own + "/v1"}
    assert api(gateway, "POST", "/v1/providers", bare, key).status == 201
    resp = chat(gateway, key, **{"x-gateway-provider": "@selfhosted", "x-gateway-custom-host": outside + "/v1",
                                 "authorization": "Bearer sk-mine"})
    assert resp.status == 200, resp.text
    assert SECRET not in msgspec.json.encode(mock.calls(outside)).decode()


def test_cloudB_resource_and_endpoint_names_are_hosts(gateway, team):
    key = team["key"]
    slug = {"slug": "az", "provider": "cloudB", "api_key": SECRET, "resource_name": "ours", "deployment_id": "d",
            "api_version": "2024-06-01"}
    assert api(gateway, "POST", "/v1/providers", slug, key).status == 201
    for config, param in (({"provider": "@az", "resource_name": "theirs"}, "resource_name"),
                          ({"provider": "@az", "cloudB_deployment_type": "serverless", "cloudB_region": "eastus",
                            "cloudB_endpoint_name": "theirs"}, "cloudB_endpoint_name")):
        resp = chat(gateway, key, **_config(config))
        assert resp.status == 400 and resp.json()["error"]["param"] == param, resp.text
    # a header fills only what the slug leaves unset: a slug without a resource of its own
    slug = {"slug": "azkey", "provider": "cloudB", "api_key": SECRET, "deployment_id": "d", "api_version": "v1"}
    assert api(gateway, "POST", "/v1/providers", slug, key).status == 201
    resp = chat(gateway, key, **{"x-gateway-provider": "@azkey", "x-gateway-cloudB-resource-name": "theirs"})
    assert resp.status == 400 and resp.json()["error"]["param"] == "x-gateway-cloudB-resource-name", resp.text


def test_saved_configs_follow_the_rule_when_saved_and_when_used(gateway, mock, team):
    key, own, outside = team["key"], team["own"], team["outside"]
    leaking = {"name": "leak", "config": {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "@team", "custom_host": outside + "/v1"}]}}
    resp = api(gateway, "POST", "/v1/configs", leaking, key)
    assert resp.status == 400 and resp.json()["error"]["param"] == "config.targets[0].custom_host", resp.text
    fine = {"name": "pinned", "config": {"provider": "@team", "custom_host": own + "/v1"}}
    saved = api(gateway, "POST", "/v1/configs", fine, key)
    assert saved.status == 201, saved.text
    assert chat(gateway, key, **{"x-gateway-config": saved.json()["id"]}).status == 200
    # the slug moves (its key sent again: a stored key never follows a move on its own): the saved config's host is
    # no longer the slug's, so requests using it stop
    moved = api(gateway, "PUT", "/v1/providers/team", {"custom_host": outside + "/v1", "api_key": SECRET}, key)
    assert moved.status == 200
    resp = chat(gateway, key, **{"x-gateway-config": saved.json()["id"]})
    assert resp.status == 400 and resp.json()["error"]["param"] == "custom_host", resp.text
    assert mock.calls(own)["calls"] == 1 and mock.calls(outside)["calls"] == 0
