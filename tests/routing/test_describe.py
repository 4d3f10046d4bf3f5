"""The routing tree a config makes, as the playground shows it: paths, strategies, how each target is picked and
where each of its settings comes from."""

from __future__ import annotations

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.routing.describe import HIDDEN, describe
from gateway.routing.plan import Planner


def tree(text: str):
    parser = ConfigParser(config_checks())
    return describe(parser.parse(text), Planner(parser))


def test_a_config_without_targets_is_one_node_with_its_own_settings():
    root = tree('{"provider": "vendorA", "api_key": "sk-1", "custom_host": "http://h/v1", "retry": {"attempts": 1}}')
    assert root.path == "config" and root.targets is None and root.strategy is None
    assert root.settings["api_key"].value == HIDDEN
    assert root.settings["custom_host"].value == "http://h/v1" and not root.settings["custom_host"].inherited
    assert root.settings["retry"].value == {"attempts": 1}


def test_settings_flow_down_to_any_depth_and_say_where_they_come_from():
    root = tree('{"retry": {"attempts": 3}, "cache": {"mode": "simple"}, "strategy": {"mode": "fallback"},'
                ' "targets": [{"provider": "vendorA", "api_key": "k"},'
                '  {"cache": {"mode": "semantic"}, "strategy": {"mode": "single"},'
                '   "targets": [{"provider": "groq", "api_key": "k", "retry": {"attempts": 0}}]}]}')
    leaf = root.targets[1].targets[0]
    assert leaf.path == "config.targets[1].targets[0]"
    assert (leaf.settings["cache"].value, leaf.settings["cache"].source) == ({"mode": "semantic"}, "config.targets[1]")
    assert leaf.settings["cache"].inherited
    assert (leaf.settings["retry"].value, leaf.settings["retry"].inherited) == ({"attempts": 0}, False)
    first = root.targets[0]
    assert first.settings["retry"].source == "config" and first.settings["retry"].inherited
    assert "strategy" not in first.settings and "targets" not in leaf.settings  # never inherited


def test_how_each_strategy_picks_its_targets():
    lb = tree('{"strategy": {"mode": "loadbalance"}, "targets": [{"provider": "vendorA", "api_key": "k", "weight": 0},'
              ' {"provider": "groq", "api_key": "k"}]}')
    assert [t.weight for t in lb.targets] == [0.0, 1.0]
    fb = tree('{"strategy": {"mode": "fallback", "on_status_codes": [500]}, "targets": ['
              '{"provider": "vendorA", "api_key": "k", "on_status_codes": [429]},'
              ' {"provider": "groq", "api_key": "k"}]}')
    assert [t.fallback_on for t in fb.targets] == [[429], [500]]


def test_describing_a_config_does_not_fill_the_routers_plan_cache():
    parser = ConfigParser(config_checks())
    planner = Planner(parser)
    config = parser.parse('{"provider": "vendorA", "api_key": "never-planned-before"}')
    describe(config, planner)
    assert planner.plan(config) is planner.plan(config)  # the router caches its own plan...
    assert planner.build(config) is not planner.plan(config)  # ...which building afresh never touches
