"""``default.webhook``: a custom check answered by your own service: POSTs the request (and answer) to a URL.

Parameters: ``webhookURL`` (http(s) URL, required); ``headers`` (object of header name -> string, default none:
sent as they are, e.g. ``Authorization``); ``timeout`` (milliseconds, 1..60000, default 3000). The payload and the
answer expected are described in ``gateway.guardrails.webhook``. The check passes when the webhook answers
``{"verdict": true}``; it fails (with an explanation saying why) when it answers ``{"verdict": false}``, when the
URL is refused by the SSRF rules, unreachable, answers a non-2xx status, something that is not a JSON object with a
boolean ``verdict``, more than 1 MiB, or nothing within ``timeout``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, join_path
from gateway.guardrails.text import Subject
from gateway.guardrails.webhook import HttpCheckError, webhook_payload

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type"})


class WebhookParams(Params, frozen=True):
    webhookURL: str
    headers: dict[str, str] = {}
    timeout: Annotated[int, msgspec.Meta(ge=1, le=60000)] = 3000


class Webhook(Check):
    id = "default.webhook"
    params_type = WebhookParams
    io = True

    def __init__(self, params: WebhookParams, path: str) -> None:
        super().__init__(params, path)
        from gateway.http.errors import InvalidRequest
        from gateway.upstream.ssrf import check_url

        where = join_path(path, "webhookURL")
        try:
            check_url(params.webhookURL, where)
        except InvalidRequest as exc:
            raise ParamError(where, exc.message) from None
        for name, value in params.headers.items():
            at = join_path(path, f"headers.{name}")
            if not _TOKEN.match(name) or name.lower() in _RESERVED:
                raise ParamError(at, "is not a header name that may be set")
            if "\r" in value or "\n" in value:
                raise ParamError(at, "must not contain line breaks")

    async def run_io(self, subject: Subject, io: Any) -> Verdict:
        p = self.params
        try:
            answer = await io.post_json(p.webhookURL, p.headers, webhook_payload(subject), p.timeout)
        except HttpCheckError as exc:
            return Verdict(False, f"webhook failed: {exc}")
        if not isinstance(answer, dict) or type(answer.get("verdict")) is not bool:
            return Verdict(False, 'webhook answer is not a JSON object with a boolean "verdict"')
        explanation = answer.get("explanation")
        if not isinstance(explanation, str):
            explanation = "webhook passed the check" if answer["verdict"] else "webhook failed the check"
        return Verdict(answer["verdict"], explanation, answer.get("data"))
