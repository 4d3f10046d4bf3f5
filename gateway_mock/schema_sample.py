"""A deterministic JSON value that satisfies a JSON schema: the mock's forced-tool inputs and JSON-mode answers.

Covers what client libraries generate (pydantic, zod): ``type`` (also a list), ``properties`` (every property is
filled, required or not), ``items`` / ``minItems``, ``enum`` / ``const`` (the first value), ``anyOf`` / ``oneOf``
(the first branch that is not ``null``), ``allOf`` (merged), local ``$ref`` into ``$defs`` / ``definitions``,
``default``. Strings are ``"Paris"`` (or a value of their ``format``), numbers ``1``, booleans ``true``. A schema
with nothing to go on (``{}``, ``{"type": "object"}`` without properties) gives ``{"answer": "Paris"}`` at the top
and ``{}`` below it. Deeper than three levels only required properties and ``minItems`` items are made, so
recursive schemas end.
"""

from __future__ import annotations

from typing import Any

SAMPLE_STRING = "Paris"
_FORMATS = {"date-time": "2024-01-02T03:04:05Z", "date": "2024-01-02", "time": "03:04:05", "email": "a@example.com",
            "uri": "https://example.com/", "uuid": "00000000-0000-4000-8000-000000000000", "ipv4": "127.0.0.1",
            "ipv6": "::1", "hostname": "example.com", "duration": "P1D"}
#: below this depth optional properties are left out and arrays hold only minItems items (recursive schemas end)
_FULL_DEPTH = 3
_MAX_DEPTH = 8


def sample(schema: Any) -> Any:
    """A value valid against ``schema`` (the root's ``$defs`` / ``definitions`` resolve ``$ref``s)."""
    if not isinstance(schema, dict):
        return {"answer": SAMPLE_STRING}
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    value = _value(schema, defs, 0)
    if value == {} and not schema.get("properties") and schema.get("additionalProperties") is not False:
        return {"answer": SAMPLE_STRING}
    return value


def _resolve(schema: dict, defs: dict) -> dict:
    seen = 0
    while "$ref" in schema and seen < _MAX_DEPTH:
        ref = str(schema["$ref"])
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if not isinstance(target, dict):
            return {}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema


def _value(schema: Any, defs: dict, depth: int) -> Any:
    if not isinstance(schema, dict):
        return None
    schema = _resolve(schema, defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if branches:
            chosen = next((b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")),
                          branches[0])
            return _value(chosen, defs, depth + 1)
    if schema.get("allOf"):
        merged: dict = {}
        for part in schema["allOf"]:
            part = _resolve(part, defs) if isinstance(part, dict) else {}
            merged.update(part)
            if "properties" in part:
                merged["properties"] = {**merged.get("properties", {}), **part["properties"]}
        return _value(merged, defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    if kind is None and "default" in schema:
        return schema["default"]
    if kind == "object" or kind is None:
        if depth >= _MAX_DEPTH:
            return {}
        required = schema.get("required") or ()
        return {name: _value(sub, defs, depth + 1) for name, sub in (schema.get("properties") or {}).items()
                if depth < _FULL_DEPTH or name in required}
    if kind == "array":
        least = int(schema.get("minItems") or 0)
        if depth >= _MAX_DEPTH:
            return []
        count = least if depth >= _FULL_DEPTH or schema.get("maxItems") == 0 else max(1, least)
        return [_value(schema.get("items") or {"type": "string"}, defs, depth + 1) for _ in range(count)]
    if kind == "string":
        text = _FORMATS.get(schema.get("format") or "", SAMPLE_STRING)
        min_length = schema.get("minLength")
        if isinstance(min_length, int) and len(text) < min_length:
            text = text + "x" * (min_length - len(text))
        return text
    if kind == "integer":
        return int(max(1, schema.get("minimum", 1)))
    if kind == "number":
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    return None
