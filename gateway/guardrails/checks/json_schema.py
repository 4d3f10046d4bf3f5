"""``default.jsonSchema``: passes when the JSON in the text validates against a JSON Schema (``not`` inverts).

Parameters: ``schema`` (object, required): a JSON Schema; its ``$schema`` picks the draft (default 2020-12).
Only local references (``#...``) are allowed and nothing is fetched; ``pattern`` / ``patternProperties`` regexes
are under the same backtracking guard as ``$regex``; ``format`` is an annotation, not asserted. ``not`` (boolean,
default false). The JSON is the text itself, else its first fenced code block that parses, else the span from the
first ``{``/``[`` to the last ``}``/``]``; no JSON at all fails the check. A schema of more than 200 nodes, or
text over 16 KiB, is validated in the guardrail worker pool, off the event loop.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, inverted, join_path
from gateway.guardrails.text import Subject
from gateway.routing.conditions import QueryError, compile_guarded_regex

LARGE_SCHEMA_NODES = 200
_MAX_REPORTED = 3


class JsonSchemaParams(Params, frozen=True):
    schema: dict[str, Any]
    negate: bool = msgspec.field(default=False, name="not")


class JsonSchema(Check):
    id = "default.jsonSchema"
    params_type = JsonSchemaParams
    offload_chars = 16 * 1024

    def __init__(self, params: JsonSchemaParams, path: str) -> None:
        super().__init__(params, path)
        # Imported here: jsonschema costs tens of milliseconds to import, paid only by configs that use it.
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for
        from referencing import Registry

        where = join_path(path, "schema")
        try:
            self.nodes = _audit(params.schema, where, 0)
            cls = validator_for(params.schema)
            cls.check_schema(params.schema)
        except SchemaError as exc:
            raise ParamError(where, f"is not a valid JSON Schema: {exc.message}") from None
        except RecursionError:
            raise ParamError(where, "nests too deeply") from None
        self.validator = cls(params.schema, registry=Registry())

    def offload(self, subject: Subject) -> bool:
        return self.nodes > LARGE_SCHEMA_NODES or super().offload(subject)

    def run(self, subject: Subject) -> Verdict:
        found, value = subject.json_value()
        if not found:
            return Verdict(False, "no JSON found in the text")
        try:
            errors = sorted(self.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        except Exception as exc:  # noqa: BLE001 - an unresolvable $ref and the like: the check cannot pass
            return Verdict(False, f"the schema could not be applied: {exc}")
        if not errors:
            return Verdict(inverted(True, self.params.negate), "the JSON matches the schema")
        shown = "; ".join(f"at {e.json_path}: {e.message}" for e in errors[:_MAX_REPORTED])
        more = f" (and {len(errors) - _MAX_REPORTED} more)" if len(errors) > _MAX_REPORTED else ""
        return Verdict(inverted(False, self.params.negate), f"the JSON does not match the schema: {shown}{more}")


def _audit(node: Any, path: str, depth: int) -> int:
    """Count the schema's nodes; refuse remote references and regexes that could backtrack catastrophically."""
    if depth > 64:
        raise ParamError(path, "nests deeper than 64 levels")
    count = 1
    if isinstance(node, dict):
        for key, value in node.items():
            at = join_path(path, key)
            if key == "$ref" and isinstance(value, str) and not value.startswith("#"):
                raise ParamError(at, "only local references (starting with #) are supported")
            if key == "pattern" and isinstance(value, str):
                _guard(value, at)
            if key == "patternProperties" and isinstance(value, dict):
                for pattern in value:
                    _guard(pattern, join_path(at, pattern))
            count += _audit(value, at, depth + 1)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            count += _audit(value, f"{path}[{i}]", depth + 1)
    return count


def _guard(pattern: str, path: str) -> None:
    try:
        compile_guarded_regex(pattern, "pattern")
    except QueryError as exc:
        raise ParamError(path, exc.message) from None
