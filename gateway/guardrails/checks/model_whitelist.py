"""``default.modelWhitelist``: passes when the request's model is one of a list (``not`` inverts).

Parameters: ``models`` (non-empty array of strings, required): exact model names; ``not`` (boolean, default
false). The model is the request body's ``model`` (as the client sent it, before ``override_params``).
"""

from __future__ import annotations

import msgspec

from gateway.guardrails.checks.base import Check, Params, Verdict, inverted, words_list
from gateway.guardrails.text import Subject


class ModelWhitelistParams(Params, frozen=True):
    models: list[str]
    negate: bool = msgspec.field(default=False, name="not")


class ModelWhitelist(Check):
    id = "default.modelWhitelist"
    params_type = ModelWhitelistParams
    offload_chars = None

    def __init__(self, params: ModelWhitelistParams, path: str) -> None:
        super().__init__(params, path)
        self.models = frozenset(words_list(params.models, path, "models"))

    def run(self, subject: Subject) -> Verdict:
        model = subject.request.model
        listed = model in self.models
        return Verdict(inverted(listed, self.params.negate),
                       f"model {model!r} is {'in' if listed else 'not in'} the list")
