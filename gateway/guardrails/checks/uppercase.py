"""``default.alluppercase``: passes when every letter of the text is uppercase (``not`` inverts).

Parameters: ``not`` (boolean, default false). Characters without case (digits, punctuation, most scripts without
case) are ignored; a text with no cased letter at all does not pass.
"""

from __future__ import annotations

import msgspec

from gateway.guardrails.checks.base import Check, Params, Verdict, inverted
from gateway.guardrails.text import Subject


class LetterCaseParams(Params, frozen=True):
    negate: bool = msgspec.field(default=False, name="not")


class AllUppercase(Check):
    id = "default.alluppercase"
    params_type = LetterCaseParams

    def run(self, subject: Subject) -> Verdict:
        upper = subject.text.isupper()
        return Verdict(inverted(upper, self.params.negate),
                       "every letter is uppercase" if upper else "the text has lowercase letters or no letters")
