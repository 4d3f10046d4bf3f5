"""``default.alllowercase``: passes when every letter of the text is lowercase (``not`` inverts).

Parameters: ``not`` (boolean, default false). Characters without case are ignored; a text with no cased letter at
all does not pass.
"""

from __future__ import annotations

from gateway.guardrails.checks.base import Check, Verdict, inverted
from gateway.guardrails.checks.uppercase import LetterCaseParams
from gateway.guardrails.text import Subject


class AllLowercase(Check):
    id = "default.alllowercase"
    params_type = LetterCaseParams

    def run(self, subject: Subject) -> Verdict:
        lower = subject.text.islower()
        return Verdict(inverted(lower, self.params.negate),
                       "every letter is lowercase" if lower else "the text has uppercase letters or no letters")
