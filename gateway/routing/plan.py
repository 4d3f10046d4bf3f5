"""Config -> a routing tree of Nodes with inheritance applied, built once per config object and remembered.

Each Node knows its JSON path (``config``, ``config.targets[1]``, ``config.targets[0].targets[2]``: the value of
``x-gateway-last-used-option-index``), its effective config, its strategy and, per strategy, what it needs at run
time: cumulative weights (loadbalance), compiled condition queries and the target index of each name
(conditional), and the status codes on which each target falls back (fallback).

``has_steps`` says whether a node's effective config caches answers or runs hooks or guardrails, and
``tree_has_steps`` whether it or any node below it does: the pipeline reads these flags so a request whose config
has neither pays for nothing.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from typing import Any

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.config.validate import ConfigParser
from gateway.http.errors import InvalidRequest
from gateway.schema.config import Config


class Node:
    __slots__ = (
        "config", "children", "path", "mode", "cumulative", "total_weight", "compiled", "then_index",
        "default_index", "fallback_codes", "breaker_key", "has_breakers", "direct", "has_steps", "tree_has_steps",
        "parent",
    )

    def __init__(self, config: Config, path: str, root_id: str) -> None:
        self.config = config
        self.path = path
        self.children: list[Node] = []
        self.mode: str | None = None
        self.cumulative: list[float] = []
        self.total_weight = 0.0
        self.compiled: list[Any] = []
        self.then_index: list[int] = []
        self.default_index = -1
        self.fallback_codes: list[list[int] | None] = []
        self.breaker_key = f"{root_id}:{path}"
        self.has_breakers = False
        #: a lone target with no retry, breaker or request_timeout of its own: one plain attempt
        self.direct = False
        #: this node's effective config has a cache or hooks/guardrails; tree_: it or any node below it
        self.has_steps = _has_steps(config)
        self.tree_has_steps = self.has_steps
        #: the node this one is a target of (None at the root)
        self.parent: Node | None = None

    def pick_weighted(self) -> Node:
        """A child drawn by weight (weight 0 is never drawn)."""
        if self.total_weight <= 0:
            raise InvalidRequest(f"{self.path}: every target has weight 0", param=f"{self.path}.targets")
        point = random.random() * self.total_weight
        index = bisect.bisect_right(self.cumulative, point)
        return self.children[min(index, len(self.children) - 1)]


def _has_steps(config: Config) -> bool:
    return (config.cache is not None or config.before_request_hooks is not None
            or config.after_request_hooks is not None or config.input_guardrails is not None
            or config.output_guardrails is not None)


#: routing trees remembered per planner
CACHE_MAX = 4096


class Planner:
    """Config -> routing tree, built once per config object (configs are themselves cached by text) and remembered.
    Inheritance and compiled conditions come from ``parser``. One per worker runtime."""

    def __init__(self, parser: ConfigParser) -> None:
        self.parser = parser
        self._plans: BoundedCache[int, tuple[Config, Node]] = BoundedCache(CACHE_MAX)

    def plan(self, config: Config) -> Node:
        """The routing tree of ``config`` (cached by object identity)."""
        hit = self._plans.get(id(config))
        if hit is not None and hit[0] is config:
            return hit[1]
        node = self.build(config)
        self._plans[id(config)] = (config, node)
        return node

    def build(self, config: Config) -> Node:
        """The routing tree of ``config``, built afresh and not remembered (for a config looked at once)."""
        root_id = hashlib.sha1(msgspec.json.encode(config)).hexdigest()[:16]
        return self._build(config, None, "config", root_id)

    def _build(self, raw: Config, parent: Config | None, path: str, root_id: str) -> Node:
        config = self.parser.inheritance.effective(parent, raw) if parent is not None else raw
        node = Node(config, path, root_id)
        if not raw.targets:
            node.direct = config.retry is None and config.cb_config is None and config.request_timeout is None
            return node
        strategy = raw.strategy
        node.mode = strategy.mode if strategy is not None else "single"
        for i, child_raw in enumerate(raw.targets):
            child = self._build(child_raw, config, f"{path}.targets[{i}]", root_id)
            child.parent = node
            node.children.append(child)
            node.has_breakers = node.has_breakers or child.config.cb_config is not None or child.has_breakers
            node.tree_has_steps = node.tree_has_steps or child.tree_has_steps
        if node.mode == "loadbalance":
            total = 0.0
            for child_raw in raw.targets:
                weight = 1.0 if child_raw.weight is None else float(child_raw.weight)
                total += weight
                node.cumulative.append(total)
            node.total_weight = total
        elif node.mode == "conditional":
            assert strategy is not None and strategy.conditions is not None and strategy.default is not None
            names = {child_raw.name: i for i, child_raw in enumerate(raw.targets) if child_raw.name}
            node.compiled = list(self.parser.compiled_conditions(strategy))
            node.then_index = [names[c.then] for c in strategy.conditions]
            node.default_index = names[strategy.default]
        elif node.mode == "fallback":
            codes = strategy.on_status_codes if strategy is not None else None
            node.fallback_codes = [c.on_status_codes or codes for c in raw.targets]
        return node
