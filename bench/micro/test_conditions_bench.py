"""Micro benchmark of condition evaluation (gateway.routing.conditions): compiled twin vs pure Python.

Run: ``python -m pytest bench/micro/test_conditions_bench.py --benchmark-enable``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from gateway._speedups import NO_EXTENSIONS
from gateway.routing import conditions as pure_conditions

# A 3-condition `conditional` strategy: metadata $eq, params $gt, and an $or of $in and $regex.
CONDITIONS = [
    {"query": {"metadata.user_plan": {"$eq": "paid"}}, "then": "big"},
    {"query": {"params.temperature": {"$gt": 1.2}}, "then": "creative"},
    {
        "query": {
            "$or": [
                {"params.model": {"$in": ["gpt-x-large", "gpt-x-pro", "gpt-x-vision"]}},
                {"params.messages.0.content": {"$regex": "^You are a (coding|math) assistant"}},
            ]
        },
        "then": "specialist",
    },
]

METADATA = {"user_plan": "free", "team": "search", "env": "prod", "trace": "a1b2c3"}
PARAMS = {
    "model": "gpt-x-mini",
    "temperature": 0.7,
    "max_tokens": 1024,
    "stream": True,
    "messages": [
        {"role": "system", "content": "You are a coding assistant. Answer with short, correct code."},
        {"role": "user", "content": "Write a function that reverses a linked list in place."},
    ],
    "response_format": {"type": "text"},
}


def implementation(name: str) -> ModuleType:
    if name == "pure":
        return pure_conditions
    if NO_EXTENSIONS:
        pytest.skip("GATEWAY_NO_EXTENSIONS is set")
    try:
        return importlib.import_module("gateway._speedups.conditions")
    except ImportError as exc:
        pytest.fail(f"gateway._speedups.conditions is not built ({exc})")


@pytest.mark.parametrize("impl", ["compiled", "pure"])
def test_first_match_three_conditions(benchmark, impl: str) -> None:
    """All three conditions evaluated; the third matches through its $regex branch."""
    module = implementation(impl)
    compiled = [module.compile_query(c["query"]) for c in CONDITIONS]
    benchmark.group = "conditions: first_match, 3 conditions"
    assert benchmark(module.first_match, compiled, METADATA, PARAMS) == 2


@pytest.mark.parametrize("impl", ["compiled", "pure"])
def test_first_match_first_condition(benchmark, impl: str) -> None:
    """The common paid-plan case: the first condition matches at once."""
    module = implementation(impl)
    compiled = [module.compile_query(c["query"]) for c in CONDITIONS]
    benchmark.group = "conditions: first_match, first condition matches"
    assert benchmark(module.first_match, compiled, {**METADATA, "user_plan": "paid"}, PARAMS) == 0


def test_compile_three_conditions(benchmark) -> None:
    """Compiling (once per config, shared by both twins)."""
    benchmark.group = "conditions: compile"
    result = benchmark(lambda: [pure_conditions.compile_query(c["query"]) for c in CONDITIONS])
    assert len(result) == 3
