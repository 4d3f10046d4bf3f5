"""``default.contains``: passes when the text contains any, all or none of a list of words or phrases.

Parameters: ``words`` (non-empty array of non-empty strings, required); ``operator`` (``any`` (default), ``all`` or
``none``). Matching is by exact, case-sensitive substring.
"""

from __future__ import annotations

from typing import Literal

from gateway.guardrails.checks.base import Check, Params, Verdict, words_list
from gateway.guardrails.text import Subject


class ContainsParams(Params, frozen=True):
    words: list[str]
    operator: Literal["any", "all", "none"] = "any"


class Contains(Check):
    id = "default.contains"
    params_type = ContainsParams

    def __init__(self, params: ContainsParams, path: str) -> None:
        super().__init__(params, path)
        self.words = words_list(params.words, path, "words")

    def run(self, subject: Subject) -> Verdict:
        text = subject.text
        found = [word for word in self.words if word in text]
        operator = self.params.operator
        if operator == "any":
            passed = bool(found)
        elif operator == "all":
            passed = len(found) == len(self.words)
        else:
            passed = not found
        if found:
            explanation = f"found {len(found)} of {len(self.words)} words ({', '.join(map(repr, found[:5]))})"
        else:
            explanation = f"found none of the {len(self.words)} words"
        return Verdict(passed, f"{explanation}; operator {operator!r}")
