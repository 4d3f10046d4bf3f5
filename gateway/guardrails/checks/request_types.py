"""``default.allowedRequestTypes``: passes when the request's endpoint is allowed and not blocked.

Parameters: ``allowedTypes`` (array of endpoint names) and/or ``blockedTypes`` (array of endpoint names); at least
one is required. Endpoint names: ``chat``, ``completions``, ``embeddings``, ``moderations``, ``rerank``. With
``allowedTypes`` the endpoint must be listed; with ``blockedTypes`` it must not be.
"""

from __future__ import annotations

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, join_path
from gateway.guardrails.text import Subject

REQUEST_TYPES = ("chat", "completions", "embeddings", "moderations", "rerank")


class RequestTypesParams(Params, frozen=True):
    allowedTypes: list[str] | None = None
    blockedTypes: list[str] | None = None


class AllowedRequestTypes(Check):
    id = "default.allowedRequestTypes"
    params_type = RequestTypesParams
    offload_chars = None

    def __init__(self, params: RequestTypesParams, path: str) -> None:
        super().__init__(params, path)
        if params.allowedTypes is None and params.blockedTypes is None:
            raise ParamError(path, "needs allowedTypes or blockedTypes")
        for name in ("allowedTypes", "blockedTypes"):
            for i, value in enumerate(getattr(params, name) or ()):
                if value not in REQUEST_TYPES:
                    raise ParamError(f"{join_path(path, name)}[{i}]",
                                     f"unknown request type {value!r}; one of {', '.join(REQUEST_TYPES)}")
        self.allowed = frozenset(params.allowedTypes) if params.allowedTypes is not None else None
        self.blocked = frozenset(params.blockedTypes or ())

    def run(self, subject: Subject) -> Verdict:
        endpoint = subject.request.endpoint
        if endpoint in self.blocked:
            return Verdict(False, f"request type {endpoint!r} is blocked")
        if self.allowed is not None and endpoint not in self.allowed:
            return Verdict(False, f"request type {endpoint!r} is not allowed")
        return Verdict(True, f"request type {endpoint!r} is allowed")
