"""``default.sentenceCount``: passes when the text has between ``minSentences`` and ``maxSentences`` sentences.

Parameters: ``minSentences`` (integer >= 0, default 0); ``maxSentences`` (integer >= 0, default: no upper bound);
``not`` (boolean, default false). A sentence ends at ``.``, ``!`` or ``?`` followed by whitespace or the end of
the text (so ``3.14`` does not end one); a trailing sentence without end punctuation counts too.
"""

from __future__ import annotations

import re

import msgspec

from gateway.guardrails.checks.base import Check, Params, Verdict, check_range
from gateway.guardrails.checks.word_count import Count, bounded
from gateway.guardrails.text import Subject

_BOUNDARY = re.compile(r"(?<=[.!?])\s+")


class SentenceCountParams(Params, frozen=True):
    minSentences: Count = 0
    maxSentences: Count | None = None
    negate: bool = msgspec.field(default=False, name="not")


class SentenceCount(Check):
    id = "default.sentenceCount"
    params_type = SentenceCountParams

    def __init__(self, params: SentenceCountParams, path: str) -> None:
        super().__init__(params, path)
        check_range(params.minSentences, params.maxSentences, path, "minSentences", "maxSentences")

    def run(self, subject: Subject) -> Verdict:
        count = sentence_count(subject.text)
        p = self.params
        return bounded(count, p.minSentences, p.maxSentences, p.negate, "sentences")


def sentence_count(text: str) -> int:
    return sum(1 for piece in _BOUNDARY.split(text.strip()) if any(c.isalnum() for c in piece))
