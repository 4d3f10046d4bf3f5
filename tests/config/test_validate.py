"""Config parsing and validation: every rule answers a 400 whose param is the JSON path of the fault."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from gateway.api.config_checks import config_checks
from gateway.config.inherit import Inheritance
from gateway.config.validate import RETRY_ATTEMPTS_MAX, ConfigParser
from gateway.http.errors import ConfigError, InvalidRequest
from gateway.routing.conditions import evaluate
from gateway.schema.config import (
    CircuitBreaker,
    Condition,
    Config,
    Guardrail,
    RetryConfig,
    Strategy,
)

KEY = {"provider": "vendorA", "api_key": "sk-test"}


def parse(doc: Any, parser: ConfigParser | None = None) -> Config:
    return (parser or ConfigParser(config_checks())).parse(json.dumps(doc))


def fault(doc: Any, parser: ConfigParser | None = None) -> ConfigError:
    text = doc if isinstance(doc, (str, bytes)) else json.dumps(doc)
    with pytest.raises(ConfigError) as info:
        (parser or ConfigParser(config_checks())).parse(text)
    err = info.value
    assert isinstance(err, InvalidRequest)
    assert err.status == 400
    assert err.message.startswith("invalid config: ")
    return err


def fallback(*targets: dict, **extra: Any) -> dict:
    return {"strategy": {"mode": "fallback"}, "targets": list(targets), **extra}


# --- valid configs of each required-key group ---------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {"provider": "vendorA", "api_key": "sk"},
        {"provider": "vllm", "custom_host": "http://127.0.0.1:8000/v1"},
        {"provider": "@my-vendorA"},
        {"virtual_key": "vk-1"},
        {"strategy": {"mode": "single"}, "targets": [KEY]},
        {"cache": {"mode": "simple"}},
        {"cache": {"mode": "semantic", "max_age": 60}},
        {"retry": {"attempts": 3}},
        {"prompt_id": "pp-1"},
        {"forward_headers": ["x-trace-id"]},
        {"request_timeout": 5000},
        {"provider": "cloudA", "cloudA_access_key_id": "AK", "cloudA_secret_access_key": "SK"},
        {"provider": "cloudC", "cloudC_region": "us-central1", "cloudC_service_account_json": {"type": "x"}},
        {"provider": "cloudC", "cloudC_region": "us-central1", "cloudC_project_id": "proj"},
        {
            "provider": "cloudB",
            "cloudB_deployment_name": "d",
            "cloudB_deployment_type": "managed",
            "cloudB_region": "eastus",
            "cloudB_api_version": "2024-02-01",
        },
        {"provider": "cloudB", "cloudB_endpoint_name": "e", "cloudB_deployment_type": "serverless"},
        {"after_request_hooks": [{"id": "h1", "async": True}]},
        {"before_request_hooks": [{"id": "h1", "on_fail": {"deny": True}}]},
        {"input_guardrails": ["pg-1"]},
        {"output_guardrails": [{"id": "g", "on_fail": {"deny": True}}]},
        {"passthrough": True},
    ],
)
def test_each_required_key_group_alone_is_a_valid_config(doc):
    cfg = parse(doc)
    assert isinstance(cfg, Config)
    for key in doc:
        assert getattr(cfg, key) is not None


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"provider": "vendorA"},
        {"name": "x", "weight": 1},
        {"provider": "cloudB", "cloudB_endpoint_name": "e"},
        {"provider": "cloudC", "cloudC_region": "r"},
    ],
)
def test_a_config_outside_every_key_group_is_rejected_as_a_whole(doc):
    err = fault(doc)
    assert err.param == "config"
    assert "provider + api_key" in err.message and "virtual_key" in err.message


def test_a_target_outside_every_key_group_is_named_by_its_path():
    err = fault({"strategy": {"mode": "fallback"}, "targets": [KEY, {"name": "bare", "weight": 2}]})
    assert err.param == "targets[1]"


# --- strategy and targets -------------------------------------------------------------------------------------


def test_targets_without_strategy_names_strategy():
    assert fault({"targets": [KEY]}).param == "strategy"


def test_strategy_without_targets_names_targets():
    assert fault({"strategy": {"mode": "fallback"}}).param == "targets"
    assert fault({"strategy": {"mode": "fallback"}, "targets": []}).param == "targets"


def test_unknown_strategy_mode_names_the_mode():
    err = fault({"strategy": {"mode": "random"}, "targets": [KEY]})
    assert err.param == "strategy.mode"
    assert "loadbalance" in err.message


def test_strategy_needs_a_mode():
    assert fault({"strategy": {}, "targets": [KEY]}).param == "strategy.mode"


def test_loadbalance_with_every_weight_zero_is_rejected():
    err = fault({"strategy": {"mode": "loadbalance"}, "targets": [{**KEY, "weight": 0}, {**KEY, "weight": 0}]})
    assert err.param == "targets"
    parse({"strategy": {"mode": "loadbalance"}, "targets": [{**KEY, "weight": 0}, KEY]})


def conditional(**strategy: Any) -> dict:
    return {
        **KEY,
        "strategy": {"mode": "conditional", **strategy},
        "targets": [{"name": "fast", "override_params": {"model": "a"}}, {"name": "smart"}],
    }


def test_conditional_config_is_valid_and_its_queries_are_compiled_once():
    parser = ConfigParser(config_checks())
    cfg = parse(
        conditional(conditions=[{"query": {"metadata.tier": {"$eq": "pro"}}, "then": "smart"}], default="fast"),
        parser,
    )
    compiled = parser.compiled_conditions(cfg.strategy)
    assert parser.compiled_conditions(cfg.strategy) is compiled
    assert evaluate(compiled[0], {"tier": "pro"}, {}) is True
    assert evaluate(compiled[0], {"tier": "free"}, {}) is False


def test_compiled_conditions_of_a_strategy_built_in_code():
    strategy = Strategy(mode="conditional", conditions=[Condition(query={"params.model": "x"}, then="a")], default="a")
    assert evaluate(ConfigParser(config_checks()).compiled_conditions(strategy)[0], {}, {"model": "x"}) is True


def test_conditional_mode_requires_conditions_and_default():
    assert fault(conditional(default="fast")).param == "strategy.conditions"
    assert fault(conditional(conditions=[], default="fast")).param == "strategy.conditions"
    assert fault(conditional(conditions=[{"query": {}, "then": "fast"}])).param == "strategy.default"


def test_condition_then_must_name_a_target():
    err = fault(conditional(conditions=[{"query": {}, "then": "fast"}, {"query": {}, "then": "nope"}], default="fast"))
    assert err.param == "strategy.conditions[1].then"
    assert "'nope'" in err.message


def test_conditional_default_must_name_a_target():
    assert fault(conditional(conditions=[{"query": {}, "then": "fast"}], default="slow")).param == "strategy.default"


def test_condition_needs_query_and_then():
    assert fault(conditional(conditions=[{"query": {}}], default="fast")).param == "strategy.conditions[0].then"
    assert fault(conditional(conditions=[{"then": "fast"}], default="fast")).param == "strategy.conditions[0].query"


def test_malformed_condition_query_names_the_place_inside_the_query():
    err = fault(conditional(conditions=[{"query": {"metadata.x": {"$bogus": 1}}, "then": "fast"}], default="fast"))
    assert err.param.startswith("strategy.conditions[0].query")
    assert "$bogus" in err.message or "$bogus" in err.param


def test_nested_conditional_error_has_the_full_path():
    doc = fallback(KEY, conditional(conditions=[{"query": {}, "then": "missing"}], default="fast"))
    assert fault(doc).param == "targets[1].strategy.conditions[0].then"


# --- the numeric and enumerated settings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "param"),
    [
        (fallback(KEY, {**KEY, "cb_config": {"failure_threshold": 1, "cooldown_interval": 1000}}),
         "targets[1].cb_config.cooldown_interval"),
        ({**KEY, "cb_config": {"failure_threshold": 0, "cooldown_interval": 30000}}, "cb_config.failure_threshold"),
        ({**KEY, "cb_config": {"cooldown_interval": 30000}}, "cb_config.failure_threshold"),
        ({**KEY, "cb_config": {"failure_threshold": 2, "cooldown_interval": 30000, "failure_status_codes": [500, 99]}},
         "cb_config.failure_status_codes[1]"),
        ({"retry": {"attempts": 11}}, "retry.attempts"),
        ({"retry": {"attempts": -1}}, "retry.attempts"),
        ({"retry": {"attempts": 2.5}}, "retry.attempts"),
        ({"retry": {"attempts": 2, "on_status_codes": [429, 600]}}, "retry.on_status_codes[1]"),
        ({"retry": {"attempts": 2, "use_retry_after_headers": "yes"}}, "retry.use_retry_after_headers"),
        ({"cache": {"mode": "fuzzy"}}, "cache.mode"),
        ({"cache": {"mode": "simple", "max_age": -5}}, "cache.max_age"),
        ({"cache": {"mode": "simple", "max_age": 1.5}}, "cache.max_age"),
        ({"cache": {"max_age": 5}}, "cache.mode"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"request_timeout": "100"}, "request_timeout"),
        ({"request_timeout": 1.5}, "request_timeout"),
        ({**KEY, "weight": -1}, "weight"),
        ({**KEY, "on_status_codes": [500, "502"]}, "on_status_codes[1]"),
        (fallback(KEY, strategy={"mode": "fallback", "on_status_codes": [700]}), "strategy.on_status_codes[0]"),
        ({"provider": "cloudB", "cloudB_endpoint_name": "e", "cloudB_deployment_type": "dedicated"},
         "cloudB_deployment_type"),
        ({**KEY, "deployments": [{"deployment_id": "d", "alias": "a"}]}, "deployments[0].api_version"),
        ({**KEY, "deployments": [{"deployment_id": "d", "alias": "a", "api_version": "v", "x": 1}]},
         "deployments[0].x"),
        ({"provider": "", "api_key": "k"}, "provider"),
        ({"provider": 5, "api_key": "k"}, "provider"),
        ({**KEY, "strict_vendorA_compliance": "no"}, "strict_vendorA_compliance"),
        ({**KEY, "override_params": ["model"]}, "override_params"),
        ({**KEY, "forward_headers": "x-a"}, "forward_headers"),
        ({**KEY, "cloudC_service_account_json": "{}"}, "cloudC_service_account_json"),
    ],
)
def test_each_bad_setting_is_named_by_its_path(doc, param):
    err = fault(doc)
    assert err.param == param
    assert f"invalid config: {param}: " in err.message


def test_retry_attempts_above_the_cap_are_rejected_not_clamped():
    assert RETRY_ATTEMPTS_MAX == 10
    assert parse({"retry": {"attempts": 10}}).retry.attempts == 10
    assert parse({"retry": {"attempts": 0}}).retry.attempts == 0
    err = fault({"retry": {"attempts": 11}})
    assert "0..10" in err.message


def test_cooldown_message_says_the_minimum():
    err = fault(fallback(KEY, {**KEY, "cb_config": {"failure_threshold": 1, "cooldown_interval": 1000}}))
    assert err.message.startswith("invalid config: targets[1].cb_config.cooldown_interval: must be >= 30000")


def test_deep_path_three_levels_down():
    doc = fallback({"strategy": {"mode": "loadbalance"}, "targets": [KEY, KEY, {**KEY, "retry": {"attempts": 99}}]})
    assert fault(doc).param == "targets[0].targets[2].retry.attempts"


def test_number_settings_keep_integers_and_fractions():
    cfg = parse({**KEY, "weight": 0.5, "cb_config": {"failure_threshold": 3, "cooldown_interval": 30000.5}})
    assert cfg.weight == 0.5
    assert cfg.cb_config == CircuitBreaker(failure_threshold=3, cooldown_interval=30000.5)
    assert type(cfg.cb_config.failure_threshold) is int


# --- unknown keys, JSON and shape -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "param"),
    [
        ({**KEY, "providr": "x"}, "providr"),
        (fallback(KEY, {**KEY, "extra": 1}), "targets[1].extra"),
        ({**KEY, "retry": {"attempts": 1, "backoff": 2}}, "retry.backoff"),
        ({**KEY, "strategy": {"mode": "single", "sticky": True}, "targets": [KEY]}, "strategy.sticky"),
        ({"before_request_hooks": [{"id": "h", "when": "always"}]}, "before_request_hooks[0].when"),
    ],
)
def test_unknown_keys_are_rejected_at_every_level(doc, param):
    err = fault(doc)
    assert err.param == param
    assert "unknown key" in err.message


@pytest.mark.parametrize("text", ["{", "", "{'provider': 'x'}", '{"retry": {"attempts": 1}} trailing'])
def test_unparsable_json_is_a_400_naming_config(text):
    err = fault(text)
    assert err.param == "config"
    assert err.message.startswith("invalid config: not valid JSON")


@pytest.mark.parametrize("text", ["[]", "null", '"provider"', "42"])
def test_json_that_is_not_an_object_is_rejected(text):
    err = fault(text)
    assert err.param == "config"
    assert "must be a JSON object" in err.message


def test_bytes_and_str_texts_both_parse():
    assert ConfigParser(config_checks()).parse(b'{"virtual_key": "v"}').virtual_key == "v"
    assert ConfigParser(config_checks()).parse('{"virtual_key": "v"}').virtual_key == "v"


def test_error_renders_as_the_vendorA_envelope():
    err = fault({"retry": {"attempts": 11}})
    body = msgspec.json.decode(err.body())
    assert body["error"]["param"] == "retry.attempts"
    assert body["error"]["type"] == "invalid_request_error"


# --- passthrough ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"targets": [KEY]}, "targets"),
        ({"strategy": {"mode": "single"}, "targets": [KEY]}, "targets"),
        ({"override_params": {"model": "m"}}, "override_params"),
        ({"input_guardrails": ["g"]}, "input_guardrails"),
        ({"output_guardrails": ["g"]}, "output_guardrails"),
        ({"before_request_hooks": [{"id": "h"}]}, "before_request_hooks"),
        ({"after_request_hooks": [{"id": "h"}]}, "after_request_hooks"),
    ],
)
def test_passthrough_is_exclusive(extra, param):
    err = fault({"passthrough": True, **extra})
    assert err.param == param
    assert "passthrough" in err.message


def test_passthrough_allows_the_other_settings():
    cfg = parse({"passthrough": True, "retry": {"attempts": 2}, "default_params": {"temperature": 0}})
    assert cfg.passthrough is True


def test_passthrough_target_may_not_inherit_guardrails():
    err = fault({"input_guardrails": ["g"], "strategy": {"mode": "single"}, "targets": [{"passthrough": True}]})
    assert err.param == "targets[0].passthrough"
    assert "input_guardrails" in err.message


# --- drop_params ----------------------------------------------------------------------------------------------


def test_drop_params_take_dot_paths():
    cfg = parse({**KEY, "drop_params": ["metadata.user", "messages.0.name", "seed"]})
    assert cfg.drop_params == ["metadata.user", "messages.0.name", "seed"]


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a."])
def test_drop_params_with_an_empty_segment_are_rejected(bad):
    err = fault(fallback(KEY, {**KEY, "drop_params": ["ok", bad]}))
    assert err.param == "targets[1].drop_params[1]"


# --- configs built in code ------------------------------------------------------------------------------------


def test_validate_config_checks_a_config_built_in_code_and_returns_it():
    cfg = Config(strategy=Strategy(mode="fallback"), targets=[Config(provider="vendorA", api_key="k")])
    assert ConfigParser(config_checks()).validate(cfg) is cfg
    with pytest.raises(ConfigError) as info:
        ConfigParser(config_checks()).validate(Config(retry=RetryConfig(attempts=50)))
    assert info.value.param == "retry.attempts"


def test_validate_config_converts_guardrail_dicts_in_code_built_configs():
    words = {"words": ["x"]}
    items = [{"id": "g", "default.contains": words}, Guardrail(id="h")]
    cfg = ConfigParser(config_checks()).validate(Config(input_guardrails=items))
    assert cfg.input_guardrails == [Guardrail(id="g", checks={"default.contains": words}), Guardrail(id="h")]


# --- a 3-level config and the parse cache ---------------------------------------------------------------------

THREE_LEVELS = {
    "retry": {"attempts": 2, "on_status_codes": [429, 503]},
    "request_timeout": 30000,
    "cache": {"mode": "simple", "max_age": 60},
    "strategy": {"mode": "fallback", "on_status_codes": [500, 502, 503]},
    "targets": [
        {
            "name": "pool",
            "strategy": {"mode": "loadbalance"},
            "api_key": "sk-a",
            "targets": [
                {"provider": "vendorA", "weight": 0.7, "override_params": {"model": "gpt-x"}},
                {
                    "provider": "vendorA",
                    "weight": 0.3,
                    "cb_config": {"failure_threshold": 5, "cooldown_interval": 60000},
                    "drop_params": ["metadata.user"],
                },
            ],
        },
        {
            "strategy": {"mode": "fallback"},
            "targets": [
                {"provider": "anthropic", "api_key": "sk-b", "default_params": {"max_tokens": 256}},
                {"provider": "@backup-slug", "input_guardrails": ["pg-1"]},
            ],
        },
    ],
}


def test_three_level_config_parses_and_inherits():
    cfg = parse(THREE_LEVELS)
    inheritance = Inheritance()
    pool = inheritance.effective(cfg, cfg.targets[0])
    leaf = inheritance.effective(pool, cfg.targets[0].targets[1])
    assert leaf.api_key == "sk-a" and leaf.request_timeout == 30000 and leaf.cache.max_age == 60
    assert leaf.weight == 0.3 and leaf.cb_config.cooldown_interval == 60000
    assert cfg.targets[1].targets[1].provider == "@backup-slug"
    # Round trip: a parsed config encodes back to an equivalent config (defaults left out).
    assert ConfigParser(config_checks()).parse(msgspec.json.encode(cfg)) == cfg


def test_same_text_gives_the_same_object():
    text = json.dumps(THREE_LEVELS)
    parser = ConfigParser(config_checks())
    first = parser.parse(text)
    assert parser.parse(text) is first
    assert parser.parse(text.encode()) == first
    assert ConfigParser(config_checks()).parse(text) is not first  # another runtime's parser


def test_a_repeated_bad_config_keeps_failing_the_same_way():
    text = '{"retry": {"attempts": 11}}'
    parser = ConfigParser(config_checks())
    first = fault(text, parser)
    second = fault(text, parser)
    assert second is not first
    assert (second.message, second.param) == (first.message, first.param)


def test_the_parse_cache_is_bounded():
    parser = ConfigParser(config_checks(), max_configs=3)
    texts = [json.dumps({"virtual_key": f"v{i}"}) for i in range(5)]
    configs = [parser.parse(t) for t in texts]
    assert parser.parse(texts[-1]) is configs[-1]
    assert parser.parse(texts[0]) is not configs[0]  # evicted, parsed again
    assert parser.parse(texts[0]) == configs[0]


def test_targets_nested_too_deeply_are_a_400_not_a_crash():
    text = '{"virtual_key": "v"}'
    for _ in range(40):
        text = '{"strategy": {"mode": "single"}, "targets": [' + text + "]}"
    assert "nest deeper than 32" in fault(text).message
    for _ in range(5000):
        text = '{"strategy": {"mode": "single"}, "targets": [' + text + "]}"
    assert fault(text).param == "config"


def test_a_buffer_is_accepted_as_text():
    assert ConfigParser(config_checks()).parse(memoryview(b'{"virtual_key": "v"}')).virtual_key == "v"
    assert ConfigParser(config_checks()).parse(bytearray(b'{"virtual_key": "v"}')).virtual_key == "v"


# --- provider names, custom hosts, strategy with a root provider, breaker extras -------------------------------


@pytest.mark.parametrize(
    ("doc", "param"),
    [
        ({"strategy": {"mode": "loadbalance"}, "targets": [KEY, {**KEY, "provider": "opnai"}]}, "targets[1].provider"),
        (fallback(KEY, fallback(KEY, {"provider": "Anthropic", "api_key": "k"})), "targets[1].targets[1].provider"),
        ({"provider": "nosuch", "custom_host": "http://127.0.0.1:1/v1"}, "provider"),
        (fallback(KEY, {**KEY, "custom_host": "ftp://models.internal/v1"}), "targets[1].custom_host"),
        (fallback(KEY, {**KEY, "custom_host": "http://models.internal/v1#frag"}), "targets[1].custom_host"),
        (fallback(KEY, {**KEY, "custom_host": "https://user:pw@models.internal/v1"}), "targets[1].custom_host"),
        (fallback(KEY, {**KEY, "custom_host": "https://models.internal/v1?tenant=a"}), "targets[1].custom_host"),
        ({**KEY, "custom_host": "not a url"}, "custom_host"),
        ({**KEY, "custom_host": "http://"}, "custom_host"),
    ],
)
def test_every_targets_provider_and_custom_host_are_checked_up_front(doc, param):
    err = fault(doc)
    assert err.param == param
    assert f"invalid config: {param}: " in err.message


def test_an_unknown_provider_is_named_with_the_accepted_ones():
    err = fault({"strategy": {"mode": "fallback"}, "targets": [KEY, {**KEY, "provider": "opnai"}]})
    assert "'opnai'" in err.message and "vendorA" in err.message and "anthropic" in err.message


def test_slugs_and_every_catalogue_name_pass():
    from gateway.providers.registry import provider_names

    for name in provider_names():
        parse({"provider": name, "api_key": "k"})
    parse({"provider": "@my-slug"})


@pytest.mark.parametrize("root", [KEY, {"virtual_key": "vk-1"}, {"provider": "vendorA", "custom_host": "http://h/v1"}])
def test_strategy_is_optional_with_targets_when_the_root_names_a_provider(root):
    cfg = parse({**root, "targets": [{"override_params": {"model": "a"}}, {"override_params": {"model": "b"}}]})
    assert cfg.strategy is None and len(cfg.targets) == 2


def test_strategy_is_still_required_with_targets_otherwise():
    assert fault({"retry": {"attempts": 1}, "targets": [KEY]}).param == "strategy"
    assert fault(fallback({"retry": {"attempts": 1}, "targets": [KEY]})).param == "targets[0].strategy"
    # a nested target that inherits the root's provider needs none
    parse(fallback({"targets": [{"api_key": "k2"}]}, KEY, provider="vendorA", api_key="k"))


def test_unknown_cb_config_keys_are_accepted_and_ignored():
    cfg = parse({**KEY, "cb_config": {"failure_threshold": 2, "cooldown_interval": 30000, "half_open_requests": 1,
                                      "window_ms": 60000}})
    assert cfg.cb_config == CircuitBreaker(failure_threshold=2, cooldown_interval=30000)
    assert fault({**KEY, "cb_config": {"failure_threshold": 2}}).param == "cb_config.cooldown_interval"
