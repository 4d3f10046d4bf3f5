"""``default.characterCount``: passes when the text has between ``minCharacters`` and ``maxCharacters`` characters.

Parameters: ``minCharacters`` (integer >= 0, default 0); ``maxCharacters`` (integer >= 0, default: no upper
bound); ``not`` (boolean, default false). Characters are Unicode code points, whitespace included.
"""

from __future__ import annotations

import msgspec

from gateway.guardrails.checks.base import Check, Params, Verdict, check_range
from gateway.guardrails.checks.word_count import Count, bounded
from gateway.guardrails.text import Subject


class CharacterCountParams(Params, frozen=True):
    minCharacters: Count = 0
    maxCharacters: Count | None = None
    negate: bool = msgspec.field(default=False, name="not")


class CharacterCount(Check):
    id = "default.characterCount"
    params_type = CharacterCountParams
    offload_chars = None  # len() costs nothing

    def __init__(self, params: CharacterCountParams, path: str) -> None:
        super().__init__(params, path)
        check_range(params.minCharacters, params.maxCharacters, path, "minCharacters", "maxCharacters")

    def run(self, subject: Subject) -> Verdict:
        p = self.params
        return bounded(len(subject.text), p.minCharacters, p.maxCharacters, p.negate, "characters")
