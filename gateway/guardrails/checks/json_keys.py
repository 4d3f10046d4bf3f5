"""``default.jsonKeys``: passes when the JSON object in the text has any, all or none of the given top-level keys.

Parameters: ``keys`` (non-empty array of strings, required); ``operator`` (``any`` (default), ``all`` or
``none``). The JSON is found as for ``default.jsonSchema``; no JSON object in the text fails the check.
"""

from __future__ import annotations

from typing import Literal

from gateway.guardrails.checks.base import Check, Params, Verdict, words_list
from gateway.guardrails.text import Subject


class JsonKeysParams(Params, frozen=True):
    keys: list[str]
    operator: Literal["any", "all", "none"] = "any"


class JsonKeys(Check):
    id = "default.jsonKeys"
    params_type = JsonKeysParams

    def __init__(self, params: JsonKeysParams, path: str) -> None:
        super().__init__(params, path)
        self.keys = words_list(params.keys, path, "keys")

    def run(self, subject: Subject) -> Verdict:
        found, value = subject.json_value()
        if not found or not isinstance(value, dict):
            return Verdict(False, "no JSON object found in the text")
        present = [key for key in self.keys if key in value]
        missing = [key for key in self.keys if key not in value]
        operator = self.params.operator
        if operator == "any":
            passed = bool(present)
        elif operator == "all":
            passed = not missing
        else:
            passed = not present
        return Verdict(passed, f"keys present: {present or 'none'}, missing: {missing or 'none'}; "
                               f"operator {operator!r}", {"present": present, "missing": missing})
