"""Config validation of hooks' and guardrails' checks: unknown ids and bad parameters are 400s naming their path."""

from __future__ import annotations

import json

import pytest

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.guardrails.hooks import CompiledHook, SavedRef, compile_phase
from gateway.http.errors import ConfigError

KEY = {"provider": "vendorA", "api_key": "sk"}


def fault(doc) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        ConfigParser(config_checks()).parse(json.dumps({**KEY, **doc}))
    assert info.value.status == 400
    assert info.value.message.startswith(f"invalid config: {info.value.param}: ")
    return info.value


@pytest.mark.parametrize(
    ("doc", "param"),
    [
        ({"input_guardrails": [{"default.wordCount": {"minWords": -1}}]},
         "input_guardrails[0].default.wordCount.minWords"),
        ({"input_guardrails": ["gr_1", {"id": "g", "default.nope": {}}]}, "input_guardrails[1].default.nope"),
        ({"output_guardrails": [{"default.contains": {"words": ["a"], "operator": "most"}}]},
         "output_guardrails[0].default.contains.operator"),
        ({"before_request_hooks": [{"id": "h", "checks": [{"id": "default.regexMatch", "parameters": {}}]}]},
         "before_request_hooks[0].checks[0].parameters.rule"),
        ({"after_request_hooks": [{"id": "h", "checks": [{"id": "x.y", "parameters": {}}]}]},
         "after_request_hooks[0].checks[0].id"),
        ({"input_guardrails": [{"default.contains": {"words": ["a"]}, "deny": True, "async": True}]},
         "input_guardrails[0].async"),
        ({"after_request_hooks": [{"id": "h", "async": True, "checks": []}],
          "before_request_hooks": [{"id": "h", "checks": [], "on_fail": {"deny": True}}],
          "output_guardrails": [{"default.pii": {}, "async": True, "on_fail": {"deny": True}}]},
         "output_guardrails[0].async"),
        ({"strategy": {"mode": "fallback"}, "targets": [KEY, {**KEY, "input_guardrails": [
            {"default.jsonSchema": {"schema": {"type": 5}}}]}]},
         "targets[1].input_guardrails[0].default.jsonSchema.schema"),
    ],
)
def test_bad_checks_are_400s_naming_the_path(doc, param):
    assert fault(doc).param == param


def test_unknown_check_message_lists_the_built_in_checks():
    err = fault({"input_guardrails": [{"default.wordcount": {}}]})
    assert "unknown check 'default.wordcount'" in err.message and "default.wordCount" in err.message


def test_items_compile_to_hooks_and_saved_references():
    cfg = ConfigParser(config_checks()).parse(json.dumps({**KEY, "before_request_hooks": [
        {"id": "inline", "checks": [{"id": "default.contains", "parameters": {"words": ["x"]}}],
         "on_fail": {"deny": True}},
        {"id": "gr_saved"}],
        "input_guardrails": ["gr_str", {"id": "gr_obj", "deny": True}, {"default.pii": {}, "deny": True}]}))
    items = compile_phase(cfg, "before")
    assert [type(i) for i in items] == [CompiledHook, SavedRef, SavedRef, SavedRef, CompiledHook]
    inline, saved_hook, saved_str, saved_obj, pii = items
    assert inline.deny_on_fail and not inline.deny_on_success and inline.checks[0][0] == "default.contains"
    assert saved_hook.id == "gr_saved" and saved_str.id == "gr_str" and saved_str.overrides is None
    assert saved_obj.overrides.deny is True
    assert pii.id == "input_guardrails[2]" and pii.deny_on_fail
    assert compile_phase(cfg, "after") == ()
