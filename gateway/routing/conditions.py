"""The condition query language of the `conditional` strategy: compile a query once, evaluate it per request.

A query is a JSON object. Each key is a field path (``metadata.<key>`` or ``params.<field>``, dotted into
nested objects, a numeric segment indexing into a list) or ``$and`` / ``$or`` (a non-empty array of
queries); several keys in one object must all hold, and ``{}`` always holds. A field path's value is an
operator object (``{"$gt": 1, "$lt": 5}``: every operator must hold) or a bare value meaning ``$eq``.
A dict counts as an operator object when one of its keys starts with ``$``; any other dict is a bare value.

Operators: ``$eq $ne $gt $gte $lt $lte $in $nin $regex``. Numbers compare with numbers (``bool`` is not a
number, ``1 == 1.0``), strings with strings; arrays and objects are equal when their members are equal under
the same rules. A missing field or a type mismatch makes ``$eq $gt $gte $lt $lte $in $regex`` false and
``$ne $nin`` true. ``$regex`` is a Python ``re`` pattern (at most 512 characters, no quantified group holding a
quantifier: see REGEX_MAX_LENGTH), compiled here once and searched (``re.search``)
against string values only.

``compile_query`` turns a query into an opaque tree of tuples with int codes, raising ``QueryError`` (with
the JSON path of the fault inside the query) for a malformed one. ``evaluate`` and ``first_match`` walk
the tree; ``gateway._speedups.conditions`` is their compiled twin and reuses this module's compiler.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

# compile_guarded_regex is public too (guardrail checks use it) but stays out of __all__, which the compiled twin
# mirrors name for name.
__all__ = ["MAX_DEPTH", "CompiledQuery", "QueryError", "compile_query", "evaluate", "first_match"]

#: The compiled form of a query. Opaque: build it with ``compile_query``, read it with ``evaluate``.
#:   (_AND, (node, ...)) | (_OR, (node, ...)) | (_FIELD, source, ((key, index), ...), ((op, operand, kind), ...))
#: where index is the key as a list index (-1 when it is not one), and a $regex operand is the compiled
#: pattern's bound ``search``, an $in/$nin operand ``(frozenset of its strings, tuple of the rest)``.
CompiledQuery: TypeAlias = tuple

# Node codes. The compiled twin declares the same numbers and checks them against these at import.
_AND = 0
_OR = 1
_FIELD = 2

# Where a field path starts.
_METADATA = 0
_PARAMS = 1

# Operator codes.
_EQ = 0
_NE = 1
_GT = 2
_GTE = 3
_LT = 4
_LTE = 5
_IN = 6
_NIN = 7
_REGEX = 8

# Kinds of value: equality and ordering only hold between values of the same kind.
_K_MISSING = 0
_K_NUMBER = 1
_K_STRING = 2
_K_BOOL = 3
_K_NULL = 4
_K_ARRAY = 5
_K_OBJECT = 6
_K_OTHER = 7

_OPERATORS: dict[str, int] = {
    "$eq": _EQ,
    "$ne": _NE,
    "$gt": _GT,
    "$gte": _GTE,
    "$lt": _LT,
    "$lte": _LTE,
    "$in": _IN,
    "$nin": _NIN,
    "$regex": _REGEX,
}
_OPERATOR_LIST = ", ".join(_OPERATORS)
_SOURCES: dict[str, int] = {"metadata": _METADATA, "params": _PARAMS}

#: Deepest nesting accepted for $and/$or and for operand values (arrays/objects), so evaluation never
#: recurses without bound and both twins agree on every query that compiles.
MAX_DEPTH = 32

# Numeric path segments index into lists; larger ones cannot be a list index and simply never match one.
_INDEX_LIMIT = 1 << 62
_DIGITS = re.compile(r"[0-9]+")

#: Guards on $regex patterns, which arrive with per-request configs and run on the event loop: Python's ``re``
#: has no timeout, so the classic catastrophic-backtracking shape (a quantified group holding a quantifier)
#: and very long patterns are refused at compile time.
REGEX_MAX_LENGTH = 512
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*(?:[+*]|\{\d*,\d*\})(?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,)")


class QueryError(ValueError):
    """A malformed condition query. ``path`` is the JSON path of the fault inside the query
    (``$or[1].params.temperature.$gt``; empty for the query itself), ``message`` says what is wrong."""

    def __init__(self, message: str, path: str = "") -> None:
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.path))


class _Missing:
    """The value of a field path that does not exist in the request."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


# ---------------------------------------------------------------------------------------------- compiling


def compile_query(query: dict[str, Any]) -> CompiledQuery:
    """Compile ``query`` once into the tree ``evaluate`` reads; ``QueryError`` when it is malformed."""
    return _compile(query, "", 0)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _json_type(value: Any) -> str:
    kind = _kind(value)
    return _KIND_NAMES.get(kind, type(value).__name__)


_KIND_NAMES = {
    _K_NUMBER: "number",
    _K_STRING: "string",
    _K_BOOL: "boolean",
    _K_NULL: "null",
    _K_ARRAY: "array",
    _K_OBJECT: "object",
}


def _compile(query: Any, path: str, depth: int) -> CompiledQuery:
    if not isinstance(query, dict):
        raise QueryError(f"a query must be an object, got {_json_type(query)}", path)
    if depth > MAX_DEPTH:
        raise QueryError(f"queries nest deeper than {MAX_DEPTH} levels of $and/$or", path)
    nodes = []
    for key, value in query.items():
        if not isinstance(key, str):
            raise QueryError(f"a query key must be a string, got {type(key).__name__}", path)
        key_path = _join(path, key)
        if key == "$and" or key == "$or":
            nodes.append(_compile_logical(key, value, key_path, depth))
        elif key.startswith("$"):
            raise QueryError(
                f"unknown operator {key!r}: a query key is '$and', '$or' or a field path "
                "starting with 'metadata.' or 'params.'",
                key_path,
            )
        else:
            nodes.append(_compile_field(key, value, key_path))
    if len(nodes) == 1:
        return nodes[0]
    return (_AND, tuple(nodes))


def _compile_logical(key: str, value: Any, path: str, depth: int) -> CompiledQuery:
    if not isinstance(value, list) or not value:
        got = "an empty array" if isinstance(value, list) else _json_type(value)
        raise QueryError(f"{key} takes a non-empty array of queries, got {got}", path)
    children = tuple(_compile(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
    if len(children) == 1:
        return children[0]
    return (_AND if key == "$and" else _OR, children)


def _compile_field(key: str, value: Any, path: str) -> CompiledQuery:
    head, dot, rest = key.partition(".")
    source = _SOURCES.get(head)
    if source is None or not dot:
        raise QueryError(
            f"unknown field path {key!r}: a field path starts with 'metadata.' or 'params.'", path
        )
    segments = []
    for segment in rest.split("."):
        if not segment:
            raise QueryError(f"field path {key!r} has an empty segment", path)
        index = -1
        if _DIGITS.fullmatch(segment):
            number = int(segment)
            index = number if number < _INDEX_LIMIT else -1
        segments.append((segment, index))
    if isinstance(value, dict) and any(isinstance(k, str) and k.startswith("$") for k in value):
        tests = tuple(_compile_operator(op, operand, _join(path, str(op))) for op, operand in value.items())
    else:
        _check_depth(value, path, 0)
        tests = ((_EQ, value, _kind(value)),)
    return (_FIELD, source, tuple(segments), tests)


def _compile_operator(name: Any, operand: Any, path: str) -> tuple[int, Any, int]:
    op = _OPERATORS.get(name) if isinstance(name, str) else None
    if op is None:
        hint = "" if str(name).startswith("$") else "; operators cannot be mixed with plain keys"
        raise QueryError(f"unknown operator {name!r}: expected one of {_OPERATOR_LIST}{hint}", path)
    if op == _IN or op == _NIN:
        if not isinstance(operand, list):
            raise QueryError(f"{name} takes an array, got {_json_type(operand)}", path)
        _check_depth(operand, path, 0)
        strings = frozenset(item for item in operand if isinstance(item, str))
        others = tuple(item for item in operand if not isinstance(item, str))
        return (op, (strings, others), _K_ARRAY)
    if op == _REGEX:
        if not isinstance(operand, str):
            raise QueryError(f"$regex takes a string pattern, got {_json_type(operand)}", path)
        try:
            pattern = compile_guarded_regex(operand)
        except QueryError as exc:
            raise QueryError(exc.message, path) from None
        return (op, pattern.search, _K_STRING)
    _check_depth(operand, path, 0)
    return (op, operand, _kind(operand))


def compile_guarded_regex(pattern: str, name: str = "$regex") -> re.Pattern[str]:
    """Compile a pattern that arrives with a config, under the backtracking guard (see REGEX_MAX_LENGTH).

    Raises QueryError (with no path; ``name`` is how the message calls the pattern) for a pattern that is too
    long, has a quantified group holding a quantifier, or does not compile. Guardrail checks reuse this guard.
    """
    if len(pattern) > REGEX_MAX_LENGTH:
        raise QueryError(f"{name} pattern is longer than {REGEX_MAX_LENGTH} characters")
    if _NESTED_QUANTIFIER.search(pattern):
        raise QueryError(
            f"{name} has a quantified group that itself contains a quantifier (e.g. (a+)+): "
            "such patterns can backtrack for minutes on one request, so they are refused")
    try:
        return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise QueryError(f"{name} is not a valid regular expression: {exc}") from None


def _check_depth(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise QueryError(f"the value nests deeper than {MAX_DEPTH} levels", path)
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_depth(item, path, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _check_depth(item, path, depth + 1)


# -------------------------------------------------------------------------------------------- evaluating


def _kind(value: Any) -> int:
    cls = type(value)
    if cls is str:
        return _K_STRING
    if cls is int or cls is float:
        return _K_NUMBER
    if isinstance(value, bool):
        return _K_BOOL
    if isinstance(value, (int, float)):
        return _K_NUMBER
    if isinstance(value, str):
        return _K_STRING
    if value is None:
        return _K_NULL
    if isinstance(value, (list, tuple)):
        return _K_ARRAY
    if isinstance(value, dict):
        return _K_OBJECT
    if value is _MISSING:
        return _K_MISSING
    return _K_OTHER


def _equal(a: Any, b: Any) -> bool:
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == _K_ARRAY:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not _equal(x, y):
                return False
        return True
    if kind == _K_OBJECT:
        if len(a) != len(b):
            return False
        for key, x in a.items():
            y = b.get(key, _MISSING)
            if y is _MISSING or not _equal(x, y):
                return False
        return True
    if kind == _K_NULL:
        return True
    return bool(a == b)


def _resolve(value: Any, segments: tuple[tuple[str, int], ...]) -> Any:
    for key, index in segments:
        if isinstance(value, dict):
            value = value.get(key, _MISSING)
            if value is _MISSING:
                return value
        elif isinstance(value, (list, tuple)):
            if index < 0 or index >= len(value):
                return _MISSING
            value = value[index]
        else:
            return _MISSING
    return value


def _member(value: Any, operand: tuple[frozenset[str], tuple[Any, ...]]) -> bool:
    strings, others = operand
    if isinstance(value, str):
        return value in strings
    if value is _MISSING:
        return False
    for item in others:
        if _equal(value, item):
            return True
    return False


def _passes(op: int, operand: Any, operand_kind: int, value: Any) -> bool:
    if op == _EQ:
        return value is not _MISSING and _equal(value, operand)
    if op == _NE:
        return value is _MISSING or not _equal(value, operand)
    if op == _IN:
        return _member(value, operand)
    if op == _NIN:
        return not _member(value, operand)
    if op == _REGEX:
        return isinstance(value, str) and operand(value) is not None
    if (operand_kind != _K_NUMBER and operand_kind != _K_STRING) or _kind(value) != operand_kind:
        return False
    if op == _GT:
        return bool(value > operand)
    if op == _GTE:
        return bool(value >= operand)
    if op == _LT:
        return bool(value < operand)
    return bool(value <= operand)


def evaluate(compiled: CompiledQuery, metadata: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether the request (``metadata`` from the x-gateway-metadata header, ``params`` the body) matches."""
    code = compiled[0]
    if code == _FIELD:
        value = _resolve(params if compiled[1] == _PARAMS else metadata, compiled[2])
        for op, operand, operand_kind in compiled[3]:
            if not _passes(op, operand, operand_kind, value):
                return False
        return True
    if code == _AND:
        for child in compiled[1]:
            if not evaluate(child, metadata, params):
                return False
        return True
    for child in compiled[1]:
        if evaluate(child, metadata, params):
            return True
    return False


def first_match(compiled_list: list[CompiledQuery], metadata: dict[str, Any], params: dict[str, Any]) -> int:
    """The index of the first query in ``compiled_list`` the request matches, or -1 when none does."""
    for index, compiled in enumerate(compiled_list):
        if evaluate(compiled, metadata, params):
            return index
    return -1
