"""JSON Schema (as clients send it for tools and ``response_format``) -> the generateContent ``Schema`` object.

generateContent's ``responseSchema`` and ``functionDeclarations[].parameters`` take an OpenAPI 3.0 subset, not full
JSON Schema (the aiplatform v1 ``Schema`` type): ``type``, ``format``, ``title``, ``description``, ``nullable``,
``default``, ``items``, ``minItems``, ``maxItems``, ``enum``, ``properties``, ``propertyOrdering``, ``required``,
``minProperties``, ``maxProperties``, ``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``pattern``,
``example``, ``anyOf``; an unknown field is a 400 ("Unknown name ... Cannot find field"). What pydantic, zod and
hand-written schemas commonly hold is translated:

- local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) is replaced by the definition; a reference back into a
  definition being expanded (a recursive schema) becomes ``{"type": <its type>}`` at that point;
- ``const: v`` -> ``enum: [v]``; ``oneOf`` -> ``anyOf``; ``allOf`` -> its members merged;
- ``type: [T, "null"]`` -> ``type: T`` + ``nullable: true``; an ``anyOf`` branch ``{"type": "null"}`` -> ``nullable``;
- every other keyword (``$schema``, ``$defs``, ``additionalProperties``, ``exclusiveMinimum``, ``examples``,
  ``discriminator``...) is left out. Names inside ``properties`` are kept whatever they are.

A schema that needs no change is returned as the same object (no copy).
"""

from __future__ import annotations

from typing import Any

FIELDS = frozenset({"type", "format", "title", "description", "nullable", "default", "items", "minItems", "maxItems",
                    "enum", "properties", "propertyOrdering", "required", "minProperties", "maxProperties",
                    "minimum", "maximum", "minLength", "maxLength", "pattern", "example", "anyOf"})
#: keywords that make a schema need translating even when every key is otherwise known
_TRANSLATED = frozenset({"$ref", "const", "oneOf", "allOf"})


def openapi_schema(schema: Any) -> Any:
    """The generateContent Schema for a JSON schema (see the module docstring)."""
    if not isinstance(schema, dict):
        return schema
    if _clean(schema):
        return schema
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _convert(schema, defs, ())


def _clean(schema: Any) -> bool:
    """True when ``schema`` holds only Schema fields (and nothing to translate), all the way down."""
    if not isinstance(schema, dict):
        return True
    for key, value in schema.items():
        if key not in FIELDS or key in _TRANSLATED:
            return False
        if key == "type" and not isinstance(value, str):
            return False
        if key == "properties":
            if not isinstance(value, dict) or not all(_clean(v) for v in value.values()):
                return False
        elif key == "items" and not _clean(value):
            return False
        elif key == "anyOf" and (not isinstance(value, list) or not all(
                _clean(v) and not (isinstance(v, dict) and v.get("type") == "null") for v in value)):
            return False
    return True


def _ref_name(ref: Any) -> str | None:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    return ref.rsplit("/", 1)[-1]


def _convert(schema: Any, defs: dict[str, Any], expanding: tuple[str, ...]) -> Any:
    if not isinstance(schema, dict):
        return schema
    name = _ref_name(schema.get("$ref"))
    if name is not None and isinstance(defs.get(name), dict):
        target = defs[name]
        if name in expanding:
            kind = target.get("type")
            return {"type": kind if isinstance(kind, str) else "object"}
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _convert(merged, defs, expanding + (name,))
    if isinstance(schema.get("allOf"), list):
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _convert(part, defs, expanding)
            if isinstance(part, dict):
                properties = {**merged.get("properties", {}), **part.get("properties", {})}
                required = [*merged.get("required", []), *part.get("required", [])]
                merged.update(part)
                if properties:
                    merged["properties"] = properties
                if required:
                    merged["required"] = list(dict.fromkeys(required))
        return _convert(merged, defs, expanding)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out["properties"] = {prop: _convert(sub, defs, expanding) for prop, sub in value.items()}
        elif key == "items":
            out["items"] = _convert(value, defs, expanding)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            branches = []
            for branch in value:
                if isinstance(branch, dict) and branch.get("type") == "null":
                    out["nullable"] = True
                    continue
                branches.append(_convert(branch, defs, expanding))
            if len(branches) == 1 and isinstance(branches[0], dict):
                for sub_key, sub_value in branches[0].items():
                    out.setdefault(sub_key, sub_value)
            elif branches:
                out["anyOf"] = branches
        elif key == "const":
            out["enum"] = [value]
        elif key == "type" and isinstance(value, list):
            kinds = [k for k in value if k != "null"]
            if len(kinds) < len(value):
                out["nullable"] = True
            if kinds:
                out["type"] = kinds[0]
        elif key in FIELDS:
            out[key] = value
    return out
