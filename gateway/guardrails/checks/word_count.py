"""``default.wordCount``: passes when the text has between ``minWords`` and ``maxWords`` words (``not`` inverts).

Parameters: ``minWords`` (integer >= 0, default 0); ``maxWords`` (integer >= 0, default: no upper bound);
``not`` (boolean, default false). Words are runs of non-whitespace characters.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from gateway.guardrails.checks.base import Check, Params, Verdict, check_range, inverted
from gateway.guardrails.text import Subject

Count = Annotated[int, msgspec.Meta(ge=0)]


class WordCountParams(Params, frozen=True):
    minWords: Count = 0
    maxWords: Count | None = None
    negate: bool = msgspec.field(default=False, name="not")


class WordCount(Check):
    id = "default.wordCount"
    params_type = WordCountParams

    def __init__(self, params: WordCountParams, path: str) -> None:
        super().__init__(params, path)
        check_range(params.minWords, params.maxWords, path, "minWords", "maxWords")

    def run(self, subject: Subject) -> Verdict:
        count = len(subject.text.split())
        return bounded(count, self.params.minWords, self.params.maxWords, self.params.negate, "words")


def bounded(count: int, low: int, high: int | None, negate: bool, unit: str) -> Verdict:
    """The verdict of a count check: ``low <= count <= high`` (``high`` None: no upper bound), maybe inverted."""
    inside = count >= low and (high is None or count <= high)
    limits = f"{low}..{high}" if high is not None else f">= {low}"
    where = "within" if inside else "outside"
    return Verdict(inverted(inside, negate), f"{count} {unit}, {where} {limits}", {"count": count})
