"""Param rewriting order and dot-path dropping."""

from gateway.routing.params import needs_rewrite, rewrite
from gateway.schema.config import Config


def test_override_then_default_then_drop():
    config = Config(override_params={"a": 1, "b": {"c": 2}}, default_params={"a": 9, "d": 4, "e": 5},
                    drop_params=["e", "b.c", "list.1", "missing.path", "list.9"])
    body = {"a": 0, "list": [10, 11, 12]}
    assert rewrite(body, config) == {"a": 1, "b": {}, "d": 4, "list": [10, 12]}


def test_nothing_to_rewrite_is_detected():
    assert not needs_rewrite(Config(provider="vendorA", api_key="k"))
    assert needs_rewrite(Config(drop_params=["x"]))
