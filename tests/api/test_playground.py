"""``POST /v1/configs/validate``: the gateway's own validator answers a config's routing tree, or the 400 naming the
JSON path of its fault, exactly as a request carrying that config would get."""

from __future__ import annotations

import msgspec
import pytest

from tests.support.http import post
from tests.support.servers import ADMIN_KEY

KEY = {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"}


def validate(gateway, config: dict | str, headers: dict | None = None):
    body = config if isinstance(config, str) else msgspec.json.encode(config)
    return post(f"{gateway.url}/v1/configs/validate", body, KEY if headers is None else headers)


def test_a_valid_config_answers_its_routing_tree_with_inherited_settings(gateway):
    config = {"strategy": {"mode": "fallback", "on_status_codes": [429, 503]}, "retry": {"attempts": 2},
              "request_timeout": 5000, "api_key": "sk-secret-value",
              "targets": [{"provider": "vendorA", "name": "primary"},
                          {"strategy": {"mode": "loadbalance"}, "request_timeout": 900,
                           "targets": [{"provider": "anthropic", "weight": 3}, {"provider": "groq"}]}]}
    resp = validate(gateway, config)
    assert resp.status == 200, resp.text
    body = resp.json()
    assert body["object"] == "config.validation" and body["valid"] is True
    root = body["tree"]
    assert root["path"] == "config" and root["strategy"] == "fallback"
    first, nested = root["targets"]
    assert first["name"] == "primary" and first["fallback_on"] == [429, 503]
    assert first["settings"]["retry"] == {"value": {"attempts": 2}, "source": "config", "inherited": True}
    assert first["settings"]["provider"] == {"value": "vendorA", "source": "config.targets[0]"}
    assert nested["strategy"] == "loadbalance"
    heavy, light = nested["targets"]
    assert (heavy["weight"], light["weight"]) == (3.0, 1.0)
    assert heavy["settings"]["request_timeout"] == {"value": 900, "source": "config.targets[1]", "inherited": True}
    assert heavy["path"] == "config.targets[1].targets[0]"
    assert "sk-secret-value" not in resp.text and heavy["settings"]["api_key"]["value"] == "***"


def test_conditional_targets_say_which_conditions_route_to_them(gateway):
    config = {"strategy": {"mode": "conditional", "default": "cheap",
                           "conditions": [{"query": {"metadata.tier": "pro"}, "then": "best"},
                                          {"query": {"params.model": {"$eq": "x"}}, "then": "best"}]},
              "targets": [{"name": "best", "provider": "vendorA", "api_key": "k"},
                          {"name": "cheap", "provider": "groq", "api_key": "k"}]}
    best, cheap = validate(gateway, config).json()["tree"]["targets"]
    assert best["when"] == ["config.strategy.conditions[0]", "config.strategy.conditions[1]"]
    assert cheap["default"] is True and "when" not in cheap


@pytest.mark.parametrize("config, param", [
    ({"retry": {"attempts": 50}}, "retry.attempts"),
    ({"strategy": {"mode": "fallback"}, "targets": [{"provider": "vendorA", "api_key": "k"},
                                                   {"provider": "vendorA", "retry": {"attempts": "x"}}]},
     "targets[1].retry.attempts"),
    ({"cache": {"mode": "simple"}, "nope": 1}, "nope"),
    ("{\"retry\": ", "config"),
    ("[]", "config"),
])
def test_an_invalid_config_is_the_400_a_request_would_get(gateway, config, param):
    resp = validate(gateway, config)
    assert resp.status == 400
    error = resp.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    text = config if isinstance(config, str) else msgspec.json.encode(config).decode()
    if text.startswith("{"):  # a header value is a config only when it is an object (else a saved config's id)
        chat = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        as_header = post(f"{gateway.url}/v1/chat/completions", chat, {**KEY, "x-gateway-config": text})
        assert as_header.status == 400 and as_header.json()["error"]["param"] == param


@pytest.mark.parametrize("body", [b'{"\xc3\x28": 1}', b'{"provider": "vendor\xff"}', b'{"api_key": "k\xed\xa0\x80"}',
                                  b'{"targets": ' + b"[" * 3000 + b"]" * 3000 + b"}"])
def test_a_body_that_is_not_utf8_or_nests_too_deeply_is_a_400_naming_the_config(gateway, body):
    resp = post(f"{gateway.url}/v1/configs/validate", body, KEY)
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == "config" or error["param"].startswith("targets"), error
    assert error["message"].startswith("invalid config:")


def test_validation_needs_a_gateway_key(gateway):
    assert validate(gateway, {"retry": {"attempts": 1}}, {"content-type": "application/json"}).status == 401
    assert validate(gateway, {"retry": {"attempts": 1}}, {"x-gateway-api-key": "nope"}).status == 401


def test_slugs_are_checked_in_the_callers_workspace_as_a_request_would(gateway, mock):
    from tests.support.controlplane import api, create_key

    owner, other = create_key(gateway), create_key(gateway)
    base = mock.scenario()
    body = {"slug": "team", "provider": "vendorA", "api_key": "sk-team-secret-0123456789", "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", body, owner["key"]).status == 201
    fallback = {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@team"}, {"provider": "@nope"}]}
    as_owner = {"x-gateway-api-key": owner["key"], "content-type": "application/json"}
    assert validate(gateway, {"provider": "@team"}, as_owner).status == 200
    unknown = validate(gateway, fallback, as_owner)
    assert unknown.status == 400 and unknown.json()["error"]["param"] == "targets[1].provider"
    moved = validate(gateway, {"provider": "@team", "custom_host": "https://example.com/v1"}, as_owner)
    assert moved.status == 400 and moved.json()["error"]["param"] == "custom_host"
    # another workspace has no slug of that name
    elsewhere = validate(gateway, {"provider": "@team"}, {"x-gateway-api-key": other["key"],
                                                          "content-type": "application/json"})
    assert elsewhere.status == 400 and elsewhere.json()["error"]["param"] == "provider"


def test_saved_guardrails_are_resolved_in_the_callers_workspace_as_a_request_would(gateway, mock):
    from tests.support.controlplane import api, chat, create_key

    owner, other = create_key(gateway), create_key(gateway)
    rule = {"name": "short", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 50}}]}
    mine = api(gateway, "POST", "/v1/guardrails", rule, owner["key"]).json()["id"]
    foreign = api(gateway, "POST", "/v1/guardrails", rule, other["key"]).json()["id"]
    as_owner = {"x-gateway-api-key": owner["key"], "content-type": "application/json"}
    leaf = {"provider": "vendorA", "api_key": "sk-x", "custom_host": mock.scenario() + "/v1"}
    assert validate(gateway, {**leaf, "input_guardrails": [mine]}, as_owner).status == 200
    for missing in (foreign, "gr_nosuch"):
        config = {**leaf, "output_guardrails": [mine, missing]}
        checked = validate(gateway, config, as_owner)
        sent = chat(gateway, owner["key"], **{"x-gateway-config": msgspec.json.encode(config).decode()})
        assert checked.status == sent.status == 400, (checked.text, sent.text)
        assert checked.json()["error"] == sent.json()["error"]
        assert checked.json()["error"]["param"] == "output_guardrails[1]"
        nested = {"strategy": {"mode": "fallback"},
                  "targets": [leaf, {"strategy": {"mode": "single"},
                                     "targets": [{**leaf, "after_request_hooks": [{"id": missing}]}]}]}
        checked = validate(gateway, nested, as_owner)
        assert checked.status == 400, checked.text
        assert checked.json()["error"]["param"] == "targets[1].targets[0].after_request_hooks[0]"
        assert f"unknown guardrail '{missing}'" in checked.json()["error"]["message"]
        # a request reaching that target (the first one failing over) names the same path
        failing = {**leaf, "custom_host": mock.scenario([{"status": 500}]) + "/v1"}
        nested["targets"][0] = failing
        sent = chat(gateway, owner["key"], **{"x-gateway-config": msgspec.json.encode(nested).decode()})
        assert sent.status == 400 and sent.json()["error"] == validate(gateway, nested, as_owner).json()["error"]
    # an item inherited from a parent is named where it is declared, by the request as by the validation
    inherited = {"strategy": {"mode": "single"}, "input_guardrails": [mine, "gr_nosuch"],
                 "targets": [{"strategy": {"mode": "single"}, "targets": [leaf]}]}
    sent = chat(gateway, owner["key"], **{"x-gateway-config": msgspec.json.encode(inherited).decode()})
    checked = validate(gateway, inherited, as_owner)
    assert sent.status == checked.status == 400 and sent.json()["error"] == checked.json()["error"]
    assert checked.json()["error"]["param"] == "input_guardrails[1]"
    nested_own = {"strategy": {"mode": "single"}, "input_guardrails": [mine],
                  "targets": [{"strategy": {"mode": "single"}, "targets": [{**leaf, "input_guardrails": ["gr_no"]}]}]}
    sent = chat(gateway, owner["key"], **{"x-gateway-config": msgspec.json.encode(nested_own).decode()})
    checked = validate(gateway, nested_own, as_owner)
    assert sent.status == checked.status == 400 and sent.json()["error"] == checked.json()["error"]
    assert checked.json()["error"]["param"] == "targets[0].targets[0].input_guardrails[0]"
    # an item's own flags that the saved record cannot take are the request's 400 too
    denying = {"name": "d", "checks": rule["checks"], "deny": True}
    deny_id = api(gateway, "POST", "/v1/guardrails", denying, owner["key"]).json()["id"]
    for config, param in (({**leaf, "output_guardrails": [{"id": deny_id, "async": True}]}, "output_guardrails[0]"),
                          ({"strategy": {"mode": "single"},
                            "targets": [{**leaf, "output_guardrails": [{"id": deny_id, "async": True}]}]},
                           "targets[0].output_guardrails[0]")):
        checked = validate(gateway, config, as_owner)
        assert checked.status == 400 and checked.json()["error"]["param"] == param, checked.text
        assert f"{param}.async: an async item cannot deny" in checked.json()["error"]["message"]
        sent = chat(gateway, owner["key"], **{"x-gateway-config": msgspec.json.encode(config).decode()})
        assert sent.json()["error"] == checked.json()["error"]
