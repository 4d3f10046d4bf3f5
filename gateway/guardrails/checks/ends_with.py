"""``default.endsWith``: passes when the text ends with a suffix (``not`` inverts).

Parameters: ``suffix`` (non-empty string, required); ``not`` (boolean, default false). Trailing whitespace of the
text and of the suffix is ignored.
"""

from __future__ import annotations

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, inverted, join_path
from gateway.guardrails.text import Subject


class EndsWithParams(Params, frozen=True):
    suffix: str
    negate: bool = msgspec.field(default=False, name="not")


class EndsWith(Check):
    id = "default.endsWith"
    params_type = EndsWithParams
    offload_chars = None  # looks at the end only

    def __init__(self, params: EndsWithParams, path: str) -> None:
        super().__init__(params, path)
        self.suffix = params.suffix.rstrip()
        if not self.suffix:
            raise ParamError(join_path(path, "suffix"), "must be a non-empty string")

    def run(self, subject: Subject) -> Verdict:
        ends = subject.text.rstrip().endswith(self.suffix)
        return Verdict(inverted(ends, self.params.negate),
                       f"the text {'ends' if ends else 'does not end'} with {self.suffix!r}")
