"""Tests for gateway/routing/conditions.py and its compiled twin: the conditional strategy's query language."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway._speedups import NO_EXTENSIONS
from gateway.routing import conditions as pure_conditions
from gateway.routing import conditions_in_use
from tests.support.twins import compiled_twin


@pytest.fixture(params=["pure", "compiled"])
def cond(request: pytest.FixtureRequest) -> ModuleType:
    return pure_conditions if request.param == "pure" else compiled_twin("conditions")


def matches(cond: ModuleType, query: dict[str, Any], metadata: Any = None, params: Any = None) -> bool:
    compiled = cond.compile_query(query)
    return cond.evaluate(compiled, {} if metadata is None else metadata, {} if params is None else params)


REQUEST = {
    "model": "gpt-x",
    "temperature": 0.7,
    "max_tokens": 256,
    "stream": True,
    "user": None,
    "stop": ["\n", "END"],
    "response_format": {"type": "json_object", "schema": {"name": "answer"}},
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there"},
    ],
    "tags": {"0": "zero-key"},
}
META = {"user_plan": "paid", "tier": 2, "region": "eu", "flags": {"beta": True}, "weights": [1, 2]}

# (id, query, expected) evaluated against META / REQUEST
CASES = [
    # $eq, explicit and bare
    ("eq-str-true", {"metadata.user_plan": {"$eq": "paid"}}, True),
    ("eq-str-false", {"metadata.user_plan": {"$eq": "free"}}, False),
    ("eq-bare-true", {"params.model": "gpt-x"}, True),
    ("eq-bare-false", {"params.model": "gpt-y"}, False),
    ("eq-int-float", {"params.max_tokens": 256.0}, True),
    ("eq-float-int", {"metadata.tier": {"$eq": 2.0}}, True),
    ("eq-bool-is-not-number", {"params.stream": 1}, False),
    ("eq-number-is-not-bool", {"metadata.tier": True}, False),
    ("eq-bool", {"params.stream": True}, True),
    ("eq-null-present", {"params.user": None}, True),
    ("eq-null-missing", {"params.nothing": None}, False),
    ("eq-str-vs-number", {"metadata.tier": "2"}, False),
    ("eq-array", {"params.stop": ["\n", "END"]}, True),
    ("eq-array-order", {"params.stop": ["END", "\n"]}, False),
    ("eq-array-numbers", {"metadata.weights": [1.0, 2]}, True),
    ("eq-array-bool-vs-number", {"metadata.weights": {"$eq": [True, 2]}}, False),
    ("eq-bare-object", {"params.response_format": {"type": "json_object", "schema": {"name": "answer"}}}, True),
    ("eq-bare-object-differs", {"params.response_format": {"type": "json_object"}}, False),
    ("eq-missing", {"params.seed": {"$eq": 1}}, False),
    # $ne
    ("ne-true", {"metadata.user_plan": {"$ne": "free"}}, True),
    ("ne-false", {"metadata.user_plan": {"$ne": "paid"}}, False),
    ("ne-int-float-equal", {"metadata.tier": {"$ne": 2.0}}, False),
    ("ne-missing", {"params.seed": {"$ne": 1}}, True),
    ("ne-type-mismatch", {"metadata.tier": {"$ne": "2"}}, True),
    ("ne-bool-vs-number", {"params.stream": {"$ne": 1}}, True),
    # ordering on numbers
    ("gt-true", {"params.temperature": {"$gt": 0.5}}, True),
    ("gt-false", {"params.temperature": {"$gt": 0.7}}, False),
    ("gte-boundary", {"params.temperature": {"$gte": 0.7}}, True),
    ("gte-false", {"params.max_tokens": {"$gte": 257}}, False),
    ("lt-true", {"params.max_tokens": {"$lt": 256.5}}, True),
    ("lt-false", {"params.max_tokens": {"$lt": 256}}, False),
    ("lte-boundary", {"params.max_tokens": {"$lte": 256}}, True),
    ("lte-false", {"params.temperature": {"$lte": 0.1}}, False),
    ("range-inside", {"params.temperature": {"$gt": 0, "$lt": 1}}, True),
    ("range-outside", {"params.temperature": {"$gt": 0, "$lt": 0.5}}, False),
    # ordering on strings
    ("gt-str-true", {"metadata.region": {"$gt": "ap"}}, True),
    ("gt-str-false", {"metadata.region": {"$gt": "us"}}, False),
    ("lte-str-boundary", {"metadata.region": {"$lte": "eu"}}, True),
    # ordering never holds across types or on missing fields
    ("gt-str-vs-number", {"metadata.region": {"$gt": 1}}, False),
    ("lt-number-vs-str", {"metadata.tier": {"$lt": "9"}}, False),
    ("gte-bool-not-number", {"params.stream": {"$gte": 0}}, False),
    ("lte-null", {"params.user": {"$lte": 5}}, False),
    ("gt-missing", {"params.top_p": {"$gt": 0}}, False),
    ("lt-missing", {"params.top_p": {"$lt": 9}}, False),
    ("gt-array-operand", {"metadata.weights": {"$gt": [0]}}, False),
    # $in / $nin
    ("in-true", {"params.model": {"$in": ["gpt-y", "gpt-x"]}}, True),
    ("in-false", {"params.model": {"$in": ["gpt-y", "gpt-z"]}}, False),
    ("in-number-float", {"metadata.tier": {"$in": [1, 2.0, "x"]}}, True),
    ("in-bool-not-number", {"params.stream": {"$in": [1, "true"]}}, False),
    ("in-bool", {"params.stream": {"$in": [False, True]}}, True),
    ("in-null", {"params.user": {"$in": [None]}}, True),
    ("in-str-vs-number", {"metadata.tier": {"$in": ["2"]}}, False),
    ("in-array-member", {"metadata.weights": {"$in": [[1, 2], [3]]}}, True),
    ("in-missing", {"params.seed": {"$in": [None, 1]}}, False),
    ("in-empty", {"params.model": {"$in": []}}, False),
    ("nin-true", {"params.model": {"$nin": ["gpt-y"]}}, True),
    ("nin-false", {"params.model": {"$nin": ["gpt-x", "gpt-y"]}}, False),
    ("nin-missing", {"params.seed": {"$nin": [1]}}, True),
    ("nin-type-mismatch", {"metadata.tier": {"$nin": ["2"]}}, True),
    ("nin-int-float", {"metadata.tier": {"$nin": [2.0]}}, False),
    # $regex: re.search on strings only
    ("regex-search", {"params.model": {"$regex": "pt-"}}, True),
    ("regex-anchored", {"params.model": {"$regex": "^gpt-[xy]$"}}, True),
    ("regex-false", {"params.model": {"$regex": "^claude"}}, False),
    ("regex-case-sensitive", {"params.model": {"$regex": "GPT"}}, False),
    ("regex-inline-flag", {"params.model": {"$regex": "(?i)GPT"}}, True),
    ("regex-number", {"metadata.tier": {"$regex": "2"}}, False),
    ("regex-missing", {"params.seed": {"$regex": ".*"}}, False),
    ("regex-array", {"params.stop": {"$regex": "END"}}, False),
    # nested params paths and list indices
    ("nested-object", {"params.response_format.type": "json_object"}, True),
    ("nested-deeper", {"params.response_format.schema.name": {"$in": ["answer"]}}, True),
    ("list-index", {"params.messages.0.role": "system"}, True),
    ("list-index-1", {"params.messages.1.content": {"$regex": "^hello"}}, True),
    ("list-index-out-of-range", {"params.messages.2.role": {"$ne": "user"}}, True),
    ("list-index-out-of-range-eq", {"params.messages.2.role": "user"}, False),
    ("list-scalar-index", {"params.stop.1": "END"}, True),
    ("list-non-numeric-segment", {"params.messages.first.role": {"$eq": "system"}}, False),
    ("numeric-key-in-object", {"params.tags.0": "zero-key"}, True),
    ("path-through-scalar", {"params.model.name": {"$ne": "x"}}, True),
    ("path-through-scalar-eq", {"params.model.name": {"$regex": ""}}, False),
    ("metadata-nested", {"metadata.flags.beta": True}, True),
    ("metadata-list-index", {"metadata.weights.1": {"$gte": 2}}, True),
    ("metadata-missing", {"metadata.team": {"$in": ["a"]}}, False),
    # $and / $or / several keys
    ("and-true", {"$and": [{"metadata.user_plan": "paid"}, {"params.temperature": {"$lt": 1}}]}, True),
    ("and-false", {"$and": [{"metadata.user_plan": "paid"}, {"params.temperature": {"$gt": 1}}]}, False),
    ("or-true", {"$or": [{"params.model": "nope"}, {"params.temperature": {"$lt": 1}}]}, True),
    ("or-false", {"$or": [{"params.model": "nope"}, {"params.temperature": {"$gt": 1}}]}, False),
    ("or-single", {"$or": [{"params.model": "gpt-x"}]}, True),
    (
        "or-inside-and",
        {"$and": [{"$or": [{"metadata.region": "us"}, {"metadata.region": "eu"}]}, {"params.stream": True}]},
        True,
    ),
    (
        "and-inside-or",
        {"$or": [{"$and": [{"metadata.tier": 2}, {"params.model": "no"}]}, {"$and": [{"metadata.tier": 3}]}]},
        False,
    ),
    ("keys-anded-true", {"metadata.user_plan": "paid", "params.model": "gpt-x"}, True),
    ("keys-anded-false", {"metadata.user_plan": "paid", "params.model": "gpt-y"}, False),
    ("keys-and-or", {"params.model": "gpt-x", "$or": [{"metadata.tier": 1}, {"metadata.tier": 3}]}, False),
    ("empty-query", {}, True),
]


@pytest.mark.parametrize(("query", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_query_against_request(cond: ModuleType, query: dict[str, Any], expected: bool) -> None:
    assert matches(cond, query, META, REQUEST) is expected


def test_empty_metadata_makes_metadata_fields_missing(cond: ModuleType) -> None:
    assert matches(cond, {"metadata.user_plan": "paid"}, {}, REQUEST) is False
    assert matches(cond, {"metadata.user_plan": {"$ne": "paid"}}, {}, REQUEST) is True
    assert matches(cond, {"metadata.user_plan": {"$nin": ["paid"]}}, {}, REQUEST) is True


def test_metadata_and_params_are_separate_sources(cond: ModuleType) -> None:
    assert matches(cond, {"params.user_plan": "paid"}, {"user_plan": "paid"}, {}) is False
    assert matches(cond, {"metadata.model": "gpt-x"}, {}, {"model": "gpt-x"}) is False


def test_compiled_query_is_reusable_across_requests(cond: ModuleType) -> None:
    compiled = cond.compile_query({"params.temperature": {"$gt": 1}})
    results = [cond.evaluate(compiled, {}, {"temperature": t}) for t in (0.5, 1.5, 1, 2, "3")]
    assert results == [False, True, False, True, False]


def test_evaluate_does_not_change_the_request(cond: ModuleType) -> None:
    params = {"messages": [{"role": "user"}], "model": "m"}
    metadata = {"k": "v"}
    matches(cond, {"params.messages.0.role": "user", "metadata.k": {"$regex": "v"}}, metadata, params)
    assert params == {"messages": [{"role": "user"}], "model": "m"} and metadata == {"k": "v"}


BRIEF_CONFIG = [
    {"query": {"metadata.user_plan": {"$eq": "paid"}}, "then": "big"},
    {"query": {"$or": [{"params.model": "gpt-x"}, {"params.temperature": {"$gt": 1}}]}, "then": "other"},
]


@pytest.mark.parametrize(
    ("metadata", "params", "expected"),
    [
        ({"user_plan": "paid"}, {"model": "gpt-x"}, 0),  # both match: the first one wins
        ({"user_plan": "paid"}, {"model": "m"}, 0),
        ({"user_plan": "free"}, {"model": "gpt-x"}, 1),
        ({}, {"model": "m", "temperature": 1.5}, 1),
        ({}, {"model": "m", "temperature": 1}, -1),
        ({"user_plan": "free"}, {}, -1),
    ],
)
def test_first_match_picks_the_first_matching_condition(
    cond: ModuleType, metadata: dict, params: dict, expected: int
) -> None:
    compiled = [cond.compile_query(c["query"]) for c in BRIEF_CONFIG]
    assert cond.first_match(compiled, metadata, params) == expected


def test_first_match_of_no_conditions_is_minus_one(cond: ModuleType) -> None:
    assert cond.first_match([], {"a": 1}, {"b": 2}) == -1


def test_first_match_catch_all_after_specific(cond: ModuleType) -> None:
    compiled = [cond.compile_query({"params.model": "a"}), cond.compile_query({}),
                cond.compile_query({"params.model": "b"})]
    assert cond.first_match(compiled, {}, {"model": "b"}) == 1
    assert cond.first_match(compiled, {}, {"model": "a"}) == 0


def _deep_query(levels: int) -> dict[str, Any]:
    """``levels`` nested $and, innermost {"params.a": 1}, each level also requiring params.b == 2."""
    query: dict[str, Any] = {"params.a": 1}
    for _ in range(levels):
        query = {"$and": [query, {"params.b": 2}]}
    return query


# (id, query, error path, fragment of the message)
ERRORS = [
    ("query-not-object", ["params.model"], "", "must be an object"),
    ("or-item-not-object", {"$or": [{"params.a": 1}, "params.b"]}, "$or[1]", "must be an object"),
    ("unknown-operator", {"params.temperature": {"$gtt": 1}}, "params.temperature.$gtt", "unknown operator '$gtt'"),
    (
        "unknown-operator-nested",
        {"$or": [{"params.model": "x"}, {"params.temperature": {"$gt": 1, "$between": [1, 2]}}]},
        "$or[1].params.temperature.$between",
        "unknown operator",
    ),
    ("operator-mixed-with-key", {"params.x": {"$gt": 1, "lt": 2}}, "params.x.lt", "unknown operator 'lt'"),
    ("unknown-top-level-operator", {"$not": {"params.x": 1}}, "$not", "unknown operator '$not'"),
    ("field-operator-at-top", {"$eq": 1}, "$eq", "unknown operator '$eq'"),
    ("logical-inside-field", {"params.x": {"$or": [1]}}, "params.x.$or", "unknown operator '$or'"),
    ("bad-path-prefix", {"body.model": "x"}, "body.model", "'metadata.' or 'params.'"),
    ("bare-source", {"params": "x"}, "params", "'metadata.' or 'params.'"),
    ("case-sensitive-source", {"Metadata.plan": "x"}, "Metadata.plan", "'metadata.' or 'params.'"),
    ("nested-bad-path", {"$and": [{"$or": [{"meta.plan": 1}]}]}, "$and[0].$or[0].meta.plan", "'metadata.'"),
    ("empty-segment-middle", {"params.response_format..type": "x"}, "params.response_format..type", "empty segment"),
    ("empty-segment-end", {"metadata.": "x"}, "metadata.", "empty segment"),
    ("empty-segment-trailing-dot", {"params.a.": "x"}, "params.a.", "empty segment"),
    ("and-not-list", {"$and": {"params.a": 1}}, "$and", "non-empty array"),
    ("or-empty", {"$or": []}, "$or", "non-empty array"),
    ("nested-or-empty", {"$and": [{"params.a": 1}, {"$or": []}]}, "$and[1].$or", "non-empty array"),
    ("in-not-list", {"params.model": {"$in": "gpt-x"}}, "params.model.$in", "$in takes an array"),
    ("nin-not-list", {"metadata.plan": {"$nin": {"a": 1}}}, "metadata.plan.$nin", "$nin takes an array"),
    ("regex-not-string", {"params.model": {"$regex": 5}}, "params.model.$regex", "string pattern"),
    ("regex-invalid", {"$or": [{"params.model": {"$regex": "gpt-("}}]}, "$or[0].params.model.$regex",
     "regular expression"),
    (
        "too-deep",
        _deep_query(pure_conditions.MAX_DEPTH + 1),
        ".".join(["$and[0]"] * (pure_conditions.MAX_DEPTH + 1)),
        "deeper than",
    ),
]


@pytest.mark.parametrize(("query", "path", "fragment"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_compile_error_names_the_path(cond: ModuleType, query: Any, path: str, fragment: str) -> None:
    with pytest.raises(cond.QueryError) as info:
        cond.compile_query(query)
    error = info.value
    assert isinstance(error, ValueError)
    assert fragment in error.message
    assert error.path == path
    assert str(error) == (f"{path}: {error.message}" if path else error.message)


def test_nesting_up_to_the_limit_compiles(cond: ModuleType) -> None:
    compiled = cond.compile_query(_deep_query(pure_conditions.MAX_DEPTH))
    assert cond.evaluate(compiled, {}, {"a": 1, "b": 2}) is True
    assert cond.evaluate(compiled, {}, {"a": 1, "b": 3}) is False


def test_too_deep_operand_value_is_rejected(cond: ModuleType) -> None:
    value: Any = 1
    for _ in range(pure_conditions.MAX_DEPTH + 2):
        value = [value]
    with pytest.raises(cond.QueryError) as info:
        cond.compile_query({"params.x": {"$eq": value}})
    assert info.value.path == "params.x.$eq"


def test_twins_expose_the_same_public_names() -> None:
    compiled = compiled_twin("conditions")
    assert compiled.__all__ == pure_conditions.__all__
    for name in pure_conditions.__all__:
        assert hasattr(compiled, name), name
    assert compiled.QueryError is pure_conditions.QueryError


def test_the_evaluator_in_use_is_a_working_twin() -> None:
    module = conditions_in_use
    assert module.IMPLEMENTATION == ("pure" if NO_EXTENSIONS else "compiled")
    assert module.first_match([pure_conditions.compile_query({"params.model": "x"})], {}, {"model": "x"}) == 0


# ------------------------------------------------------------------------------- the twins agree (hypothesis)

KEYS = ["a", "b", "0"]
OPERATORS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$regex"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1, 2),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, 2**53 + 1, 9007199254740992.0]),
    st.sampled_from(["", "a", "b", "ab", "1", "A"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
    max_leaves=8,
)
documents = st.dictionaries(st.sampled_from(KEYS), st.one_of(scalars, json_values), min_size=1, max_size=3)
patterns = st.sampled_from(["a", "^a", "b$", "a|b", "[0-9]", "^$", ".", "(?i)A", ""])
_ABSENT = object()


@st.composite
def field_conditions(draw: st.DrawFn, metadata: dict, params: dict) -> tuple[str, Any]:
    """A field path that mostly exists in the request, and a test against a value mostly taken from it."""
    source = draw(st.sampled_from(["metadata", "params"]))
    value: Any = metadata if source == "metadata" else params
    segments: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        follow = draw(st.integers(0, 9)) > 0
        if follow and isinstance(value, dict) and value:
            key = draw(st.sampled_from(sorted(value)))
            value = value[key]
        elif follow and isinstance(value, list) and value:
            index = draw(st.integers(0, len(value) - 1))
            key, value = str(index), value[index]
        else:
            key, value = draw(st.sampled_from(KEYS + ["1", "5"])), _ABSENT
        segments.append(key)
        if value is _ABSENT or not isinstance(value, (dict, list)) or draw(st.integers(0, 4)) == 0:
            break
    near = json_values if value is _ABSENT else st.one_of(st.just(value), json_values)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        near = st.one_of(st.just(value), st.integers(-2, 3), st.sampled_from([value + 1, value - 0.5]), json_values)
    elif isinstance(value, str):
        near = st.one_of(st.just(value), st.sampled_from(["", "a", "ab", "b", "1"]), json_values)
    op = draw(st.sampled_from(OPERATORS + ["bare"]))
    if op == "bare":
        test: Any = draw(near.filter(lambda v: not (isinstance(v, dict) and any(k.startswith("$") for k in v))))
    elif op in ("$in", "$nin"):
        test = {op: draw(st.lists(near, max_size=4))}
    elif op == "$regex":
        test = {op: draw(patterns)}
    else:
        test = {op: draw(near)}
        if draw(st.booleans()):
            extra = draw(st.sampled_from(["$gt", "$lt", "$ne", "$in"]))
            test[extra] = draw(st.lists(near, max_size=2)) if extra == "$in" else draw(near)
    return ".".join([source, *segments]), test


@st.composite
def queries_for(draw: st.DrawFn, metadata: dict, params: dict, depth: int = 0) -> dict[str, Any]:
    """A random query (fields, several keys, nested $and/$or) shaped after this request."""
    query: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.integers(0, 3)) if depth < 3 else 0
        if kind <= 1:
            path, test = draw(field_conditions(metadata, params))
            query[path] = test
        else:
            children = st.lists(queries_for(metadata, params, depth + 1), min_size=1, max_size=3)
            query["$and" if kind == 2 else "$or"] = draw(children)
    return query


@settings(max_examples=600, deadline=None)
@given(data=st.data(), metadata=documents, params=documents)
def test_twins_agree_on_random_queries(data: st.DataObject, metadata: dict, params: dict) -> None:
    compiled_module = compiled_twin("conditions")
    query_list = data.draw(st.lists(queries_for(metadata, params), min_size=1, max_size=3), label="queries")
    trees = [pure_conditions.compile_query(q) for q in query_list]
    for tree in trees:
        assert compiled_module.evaluate(tree, metadata, params) is pure_conditions.evaluate(tree, metadata, params)
    assert compiled_module.first_match(trees, metadata, params) == pure_conditions.first_match(
        trees, metadata, params
    )


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*", "(\\w+\\s?)*$", "(x{1,3})+", "a" * 513])
def test_regexes_that_could_backtrack_for_minutes_are_refused(pattern):
    from gateway.routing.conditions import QueryError, compile_query

    with pytest.raises(QueryError) as info:
        compile_query({"params.model": {"$regex": pattern}})
    assert info.value.path == "params.model.$regex"
