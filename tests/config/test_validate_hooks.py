"""Config validation of before/after-request hooks and input/output guardrails: shapes, outcomes, paths."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.http.errors import ConfigError
from gateway.schema.config import Config, Feedback, Guardrail, HookOutcome

KEY = {"provider": "vendorA", "api_key": "sk-test"}


def parse(doc: Any) -> Config:
    return ConfigParser(config_checks()).parse(json.dumps(doc))


def fault(doc: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        ConfigParser(config_checks()).parse(json.dumps(doc))
    assert info.value.status == 400
    assert info.value.message.startswith(f"invalid config: {info.value.param}: ")
    return info.value


def fallback(*targets: dict) -> dict:
    return {"strategy": {"mode": "fallback"}, "targets": list(targets)}


def test_hooks_with_checks_and_outcomes_parse():
    hook = {
        "id": "h1",
        "type": "guardrail",
        "checks": [{"id": "default.contains", "parameters": {"words": ["x"]}}],
        "on_fail": {"feedback": {"value": -1, "weight": 1, "metadata": {"why": "word"}}, "deny": True},
        "on_success": {"feedback": {"value": 1}},
    }
    cfg = parse({"before_request_hooks": [hook], "after_request_hooks": [{**hook, "async": True, "on_fail": {}}]})
    assert cfg.before_request_hooks[0].checks[0].parameters == {"words": ["x"]}
    assert cfg.before_request_hooks[0].on_fail.deny is True
    assert cfg.after_request_hooks[0].async_ is True


@pytest.mark.parametrize(
    ("doc", "param"),
    [
        ({"before_request_hooks": [{"type": "guardrail"}]}, "before_request_hooks[0].id"),
        ({"before_request_hooks": [{"id": "h", "async": True}]}, "before_request_hooks[0].async"),
        ({"after_request_hooks": [{"id": "h", "on_fail": {"deny": True}}]}, "after_request_hooks[0].on_fail.deny"),
        ({"after_request_hooks": [{"id": "h", "checks": [{"id": "c"}]}]},
         "after_request_hooks[0].checks[0].parameters"),
        ({"after_request_hooks": [{"id": "h", "checks": [{"parameters": {}}]}]}, "after_request_hooks[0].checks[0].id"),
        ({"after_request_hooks": [{"id": "h", "on_success": {"feedback": {"value": "1"}}}]},
         "after_request_hooks[0].on_success.feedback.value"),
        ({"after_request_hooks": [{"id": "h", "on_success": {"feedback": {"metadata": []}}}]},
         "after_request_hooks[0].on_success.feedback.metadata"),
        ({"after_request_hooks": [{"id": "h", "async": "yes"}]}, "after_request_hooks[0].async"),
    ],
)
def test_hook_faults_are_named(doc, param):
    assert fault(doc).param == param


def test_guardrail_objects_become_guardrail_structs():
    item = {
        "id": "pg-1",
        "deny": True,
        "async": False,
        "default.contains": {"operator": "none", "words": ["x"]},
        "on_fail": {"feedback": {"value": -1}, "deny": True},
    }
    cfg = parse({"input_guardrails": ["plain"], "output_guardrails": [item]})
    assert cfg.input_guardrails == ["plain"]
    guardrail = cfg.output_guardrails[0]
    assert isinstance(guardrail, Guardrail)
    assert guardrail.id == "pg-1" and guardrail.deny is True and guardrail.async_ is False
    assert guardrail.checks == {"default.contains": {"operator": "none", "words": ["x"]}}
    assert guardrail.on_fail == HookOutcome(feedback=Feedback(value=-1), deny=True)


@pytest.mark.parametrize(
    ("doc", "param"),
    [
        ({"input_guardrails": [{"id": "g", "default.contains": "words"}]}, "input_guardrails[0].default.contains"),
        ({"input_guardrails": ["ok", {"id": 7}]}, "input_guardrails[1].id"),
        ({"input_guardrails": [{"id": "g", "deny": "yes"}]}, "input_guardrails[0].deny"),
        ({"input_guardrails": [{"id": "g", "async": 1}]}, "input_guardrails[0].async"),
        ({"input_guardrails": [{"id": "g", "on_fail": {"deny": True}}]}, "input_guardrails[0].on_fail.deny"),
        ({"input_guardrails": [{"id": "g", "on_fail": {"feedbak": {}}}]}, "input_guardrails[0].on_fail.feedbak"),
        ({"output_guardrails": [{"id": "g", "on_success": {"feedback": {"weight": "x"}}}]},
         "output_guardrails[0].on_success.feedback.weight"),
        ({"output_guardrails": [{}]}, "output_guardrails[0]"),
        ({"output_guardrails": [5]}, "output_guardrails[0]"),
        ({"output_guardrails": [""]}, "output_guardrails[0]"),
        (fallback(KEY, {**KEY, "input_guardrails": [{"id": "g", "x": []}]}), "targets[1].input_guardrails[0].x"),
    ],
)
def test_guardrail_faults_are_named(doc, param):
    assert fault(doc).param == param
