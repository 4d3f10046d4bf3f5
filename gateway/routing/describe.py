"""A config's routing tree as plain data: each target's path, strategy, how it is chosen, and every setting it has,
marked with where it comes from (set on the target itself or inherited from which ancestor).

Built by the same planner the router runs (``Planner.build``), so what it shows is what requests get. Credentials
(API keys, cloud secrets, service accounts) appear as ``"***"``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.routing.plan import Node, Planner
from gateway.schema.config import NOT_INHERITED, Config

SECRET_FIELDS = frozenset({
    "api_key", "virtual_key", "cloudA_access_key_id", "cloudA_secret_access_key", "cloudA_session_token",
    "cloudC_service_account_json",
})
HIDDEN = "***"
_SHOWN = tuple(name for name in Config.__struct_fields__ if name not in NOT_INHERITED)


class Setting(msgspec.Struct, omit_defaults=True):
    value: Any
    #: JSON path of the config that sets it: the target itself or the ancestor it inherits from
    source: str
    inherited: bool = False


class TargetTree(msgspec.Struct, omit_defaults=True):
    """One node of the routing tree: the root config or a target."""

    path: str
    settings: dict[str, Setting]
    name: str | None = None
    strategy: str | None = None
    #: how the parent picks this target: its weight (loadbalance), the status codes that fall back from it,
    #: the conditions that route to it and whether it is the default (conditional)
    weight: float | None = None
    fallback_on: list[int] | None = None
    when: list[str] | None = None
    default: bool | None = None
    targets: list[TargetTree] | None = None


def _value(name: str, value: Any) -> Any:
    return HIDDEN if name in SECRET_FIELDS else msgspec.to_builtins(value)


def _describe(node: Node, raw: Config, sources: dict[str, str]) -> TargetTree:
    own = {name: node.path for name in _SHOWN if getattr(raw, name) is not None}
    here = {**sources, **own}
    settings = {
        name: Setting(_value(name, getattr(node.config, name)), here[name], here[name] != node.path)
        for name in _SHOWN
        if getattr(node.config, name) is not None and name in here
    }
    tree = TargetTree(node.path, settings, name=raw.name)
    if not raw.targets:
        return tree
    tree.strategy = node.mode
    children = [_describe(child, child_raw, here) for child, child_raw in zip(node.children, raw.targets)]
    if node.mode == "loadbalance":
        for child, child_raw in zip(children, raw.targets):
            child.weight = 1.0 if child_raw.weight is None else float(child_raw.weight)
    elif node.mode == "fallback":
        for child, codes in zip(children, node.fallback_codes):
            child.fallback_on = list(codes) if codes else None
    elif node.mode == "conditional":
        strategy = raw.strategy
        assert strategy is not None and strategy.conditions is not None  # validated
        for i, target in enumerate(node.then_index):
            routed = children[target]
            routed.when = (routed.when or []) + [f"{node.path}.strategy.conditions[{i}]"]
        children[node.default_index].default = True
    tree.targets = children
    return tree


def describe(config: Config, planner: Planner) -> TargetTree:
    """The routing tree of a validated config, built by ``planner`` (and not remembered by it)."""
    return _describe(planner.build(config), config, {})
