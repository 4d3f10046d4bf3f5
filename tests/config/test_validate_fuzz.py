"""Property: any JSON object either parses into a Config or answers a ConfigError naming a path; never a crash."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.api.config_checks import config_checks
from gateway.config.validate import STRATEGY_MODES, ConfigParser
from gateway.http.errors import ConfigError
from gateway.schema.config import Config, Guardrail

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 70000), st.floats(-1, 1e5, allow_nan=False), st.text(max_size=6)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["id", "mode", "x", "query"]), inner, max_size=3),
    max_leaves=8,
)
_TEXT = st.text(alphabet="ab@", max_size=3)
_VALUES = {
    "strategy": st.fixed_dictionaries(
        {"mode": st.sampled_from([*STRATEGY_MODES, "other"])},
        optional={
            "conditions": st.lists(st.fixed_dictionaries({"query": st.just({}), "then": st.sampled_from("ab")})),
            "default": st.sampled_from("abc"),
            "on_status_codes": st.lists(st.integers(0, 700), max_size=2),
        },
    ),
    "retry": st.fixed_dictionaries({"attempts": st.integers(-2, 12)}),
    "cb_config": st.fixed_dictionaries(
        {"failure_threshold": st.integers(0, 3), "cooldown_interval": st.integers(0, 60000)}
    ),
    "cache": st.fixed_dictionaries({"mode": st.sampled_from(["simple", "semantic", "x"])}),
    "input_guardrails": st.lists(
        st.text(max_size=3) | st.dictionaries(st.text(max_size=4), _JSON, max_size=3), max_size=2
    ),
    "output_guardrails": st.lists(st.sampled_from(["g", ""]) | st.fixed_dictionaries({"id": _TEXT}), max_size=2),
    "after_request_hooks": st.lists(st.dictionaries(st.sampled_from(["id", "async", "on_fail"]), _JSON), max_size=2),
    "drop_params": st.lists(st.text(alphabet="a.", max_size=4), max_size=2),
}


def _mostly(typed):
    """Usually a value of the right type, now and then any JSON value."""
    return st.integers(0, 9).flatmap(lambda n: _JSON if n == 0 else typed)


_PLAIN = {
    "provider": _TEXT,
    "api_key": _TEXT,
    "virtual_key": _TEXT,
    "name": st.sampled_from("abc"),
    "weight": st.integers(-1, 3),
    "request_timeout": st.integers(-1, 3),
    "passthrough": st.booleans(),
    "override_params": st.dictionaries(_TEXT, _SCALARS, max_size=2),
    "cloudB_deployment_type": st.sampled_from(["serverless", "managed", "x"]),
    "forward_headers": st.lists(_TEXT, max_size=2),
}


def _node(children):
    plain = st.fixed_dictionaries({}, optional={k: _mostly(v) for k, v in _PLAIN.items()})
    extra = st.fixed_dictionaries({}, optional={k: _mostly(v) for k, v in _VALUES.items()})
    with_targets = st.one_of(
        st.just({}),
        st.fixed_dictionaries({"strategy": _VALUES["strategy"], "targets": st.lists(children, max_size=3)}),
        st.fixed_dictionaries({}, optional={"targets": st.lists(children, max_size=3)}),
    )
    return st.tuples(plain, extra, with_targets).map(lambda parts: {k: v for p in parts for k, v in p.items()})


_CONFIGS = st.recursive(_node(st.just({"virtual_key": "v"})), _node, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_CONFIGS)
def test_any_config_object_parses_or_names_a_path(doc):
    parser = ConfigParser(config_checks())
    try:
        cfg = parser.parse(json.dumps(doc))
    except ConfigError as err:
        assert err.param and err.message.startswith("invalid config: ")
        return
    assert isinstance(cfg, Config)
    assert parser.validate(cfg) is cfg  # validating again changes nothing
    for item in cfg.input_guardrails or ():
        assert isinstance(item, (str, Guardrail))
