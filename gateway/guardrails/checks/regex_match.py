"""``default.regexMatch``: passes when the text matches a regular expression (``not`` inverts).

Parameters: ``rule`` (string, required): a Python ``re`` pattern, searched anywhere in the text, under the same
backtracking guard as conditional routing's ``$regex`` (at most 512 characters, no quantified group holding a
quantifier); ``not`` (boolean, default false).
"""

from __future__ import annotations

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, inverted, join_path
from gateway.guardrails.text import Subject
from gateway.routing.conditions import QueryError, compile_guarded_regex


class RegexMatchParams(Params, frozen=True):
    rule: str
    negate: bool = msgspec.field(default=False, name="not")


class RegexMatch(Check):
    id = "default.regexMatch"
    params_type = RegexMatchParams

    def __init__(self, params: RegexMatchParams, path: str) -> None:
        super().__init__(params, path)
        try:
            self.pattern = compile_guarded_regex(params.rule, "rule")
        except QueryError as exc:
            raise ParamError(join_path(path, "rule"), exc.message) from None

    def run(self, subject: Subject) -> Verdict:
        match = self.pattern.search(subject.text)
        passed = inverted(match is not None, self.params.negate)
        found = "matches" if match is not None else "does not match"
        return Verdict(passed, f"the text {found} the pattern {self.params.rule!r}")
