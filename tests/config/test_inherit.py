"""Inheritance: a target takes every setting it leaves unset, except targets/strategy/name/weight/on_status_codes."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from gateway.api.config_checks import config_checks
from gateway.config.inherit import Inheritance
from gateway.config.validate import ConfigParser
from gateway.schema.config import INHERITED_FIELDS, Config, RetryConfig, Strategy


@pytest.fixture
def effective() -> Callable[[Config | None, Config], Config]:
    """A fresh Inheritance's ``effective`` (its own cache)."""
    return Inheritance().effective


def parse(doc: Any) -> Config:
    return ConfigParser(config_checks()).parse(json.dumps(doc))


def test_target_with_only_provider_inherits_the_parents_api_key(effective):
    cfg = parse({"api_key": "sk-parent", "strategy": {"mode": "fallback"}, "targets": [{"provider": "anthropic"}]})
    target = effective(cfg, cfg.targets[0])
    assert target.provider == "anthropic"
    assert target.api_key == "sk-parent"


def test_inherited_settings_count_three_levels_down(effective):
    doc = {
        "provider": "vendorA",
        "retry": {"attempts": 2},
        "strategy": {"mode": "fallback"},
        "targets": [
            {"strategy": {"mode": "loadbalance"}, "targets": [{"api_key": "k1", "weight": 1}, {"name": "n"}]},
        ],
    }
    cfg = parse(doc)
    mid = effective(cfg, cfg.targets[0])
    leaf = effective(mid, cfg.targets[0].targets[1])
    assert leaf.provider == "vendorA" and leaf.retry == RetryConfig(attempts=2)
    assert leaf.name == "n" and leaf.strategy is None


def test_effective_never_takes_targets_strategy_name_weight_or_on_status_codes(effective):
    parent = Config(
        provider="vendorA",
        api_key="k",
        name="parent",
        weight=3,
        on_status_codes=[500],
        strategy=Strategy(mode="fallback"),
        targets=[Config(virtual_key="v")],
        override_params={"model": "m"},
    )
    child = effective(parent, Config(virtual_key="v2", override_params={"model": "own"}))
    assert child.name is None and child.weight is None and child.on_status_codes is None
    assert child.strategy is None and child.targets is None
    assert child.provider == "vendorA" and child.api_key == "k"
    assert child.override_params == {"model": "own"}  # a target's own setting wins whole, not merged
    assert set(INHERITED_FIELDS) == set(Config.__struct_fields__) - {
        "targets",
        "strategy",
        "name",
        "weight",
        "on_status_codes",
    }


def test_effective_returns_the_child_itself_when_nothing_is_inherited_and_reuses_results(effective):
    child = Config(virtual_key="v")
    assert effective(None, child) is child
    assert effective(Config(name="only-name"), child) is child
    parent = Config(api_key="k")
    assert effective(parent, child) is effective(parent, child)
