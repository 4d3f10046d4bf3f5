"""``default.requiredMetadataKeys``: passes when the request's metadata has the required keys (and values).

The metadata is the ``x-gateway-metadata`` object. Parameters:
- ``metadataKeys`` (array of strings): keys that must be present, judged by ``operator``: ``all`` (default), ``any``
  or ``none`` (none of them may be present).
- ``metadata`` (object, key -> string or array of strings): each key must be present and its value must match,
  judged by ``matchType``:
  - ``exact`` (default): the value equals the string (an array: equals one of them);
  - ``contains``: the value contains the string (an array: contains at least one of them);
  - ``containsAll``: the value contains every string of the array (a string: that string);
  - ``regex``: the value matches the pattern (an array: at least one of them), searched anywhere, under the same
    backtracking guard as conditional routing's ``$regex``.
  A value that is not a string is compared in its JSON form (``3``, ``true``).
- ``not`` (boolean, default false) inverts the verdict.
At least one of ``metadataKeys`` and ``metadata`` is required.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, inverted, join_path
from gateway.guardrails.text import Subject
from gateway.routing.conditions import QueryError, compile_guarded_regex

_encode = msgspec.json.encode


class RequiredMetadataParams(Params, frozen=True):
    metadataKeys: list[str] | None = None
    operator: Literal["all", "any", "none"] = "all"
    metadata: dict[str, Any] | None = None  # key -> string or array of strings, checked in __init__ to name the key
    matchType: Literal["exact", "contains", "containsAll", "regex"] = "exact"
    negate: bool = msgspec.field(default=False, name="not")


class RequiredMetadataKeys(Check):
    id = "default.requiredMetadataKeys"
    params_type = RequiredMetadataParams
    offload_chars = None

    def __init__(self, params: RequiredMetadataParams, path: str) -> None:
        super().__init__(params, path)
        if params.metadataKeys is None and params.metadata is None:
            raise ParamError(path, "needs metadataKeys or metadata")
        if params.metadataKeys is not None and not params.metadataKeys:
            raise ParamError(join_path(path, "metadataKeys"), "must be a non-empty array of keys")
        self.keys = tuple(params.metadataKeys or ())
        self.expected: list[tuple[str, tuple[Any, ...]]] = []
        for key, want in (params.metadata or {}).items():
            values = tuple(want) if isinstance(want, list) else (want,)
            at = join_path(path, f"metadata.{key}")
            if not values or not all(isinstance(v, str) for v in values):
                raise ParamError(at, "must be a string or a non-empty array of strings")
            if params.matchType == "regex":
                values = tuple(_compile(v, f"{at}[{i}]" if isinstance(want, list) else at)
                               for i, v in enumerate(values))
            self.expected.append((key, values))

    def run(self, subject: Subject) -> Verdict:
        metadata = subject.request.metadata
        problems: list[str] = []
        if self.keys:
            present = [key for key in self.keys if key in metadata]
            operator = self.params.operator
            if operator == "all" and len(present) < len(self.keys):
                problems.append(f"missing keys {[k for k in self.keys if k not in metadata]}")
            elif operator == "any" and not present:
                problems.append(f"none of the keys {list(self.keys)} is present")
            elif operator == "none" and present:
                problems.append(f"keys {present} must not be present")
        for key, values in self.expected:
            if key not in metadata:
                problems.append(f"missing key {key!r}")
            elif not self._matches(_as_text(metadata[key]), values):
                problems.append(f"value of {key!r} does not match ({self.params.matchType})")
        passed = not problems
        explanation = "the metadata has what is required" if passed else "; ".join(problems)
        return Verdict(inverted(passed, self.params.negate), explanation)

    def _matches(self, value: str, values: tuple[Any, ...]) -> bool:
        kind = self.params.matchType
        if kind == "exact":
            return value in values
        if kind == "contains":
            return any(v in value for v in values)
        if kind == "containsAll":
            return all(v in value for v in values)
        return any(pattern.search(value) for pattern in values)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else _encode(value).decode()


def _compile(pattern: str, path: str) -> Any:
    try:
        return compile_guarded_regex(pattern, "matchType regex")
    except QueryError as exc:
        raise ParamError(path, exc.message) from None
