"""Running one guardrail outside any request (``POST /v1/guardrails/{id}/check`` and ``POST /v1/guardrails/check``):
the check body, its validation, what the guardrail judges, and the answer.

The body: ``stage`` (``input``, the default, or ``output``); for ``input``, ``text`` (judged as a chat request whose
one user message is that text) or ``messages`` (a chat request's messages, validated as chat's); for ``output``,
``text`` (an answer's text) or ``response`` (a chat completion: an object with a ``choices`` array), with optional
``messages`` for the request it answered; ``model`` (optional) is the request's model (``default.modelWhitelist``
reads it). The inline route also takes ``guardrail``: the fields of ``POST /v1/guardrails`` (``name`` optional,
no ``workspace_id``), validated as a saved guardrail's are, its faults named under ``guardrail.``. A bad field is
a 400 naming it.

The guardrail runs through the worker's ``GuardrailRunner`` as a config item does (``input_guardrails`` for the
input stage, ``output_guardrails`` for the output stage): the same checks, webhooks, saved-guardrail cache, worker
pool, deny and ``on_fail`` / ``on_success``. An ``async`` guardrail runs awaited here (the caller asked for its
verdict) and its result says ``"async": true``, as a request's log line shows async results. The answer is
``{"object": "guardrail.check", "guardrail_id", "stage", "verdict", "deny", "hook_results", "transformed"}``:
``hook_results`` in exactly the shape a request's answer carries (the input stage's result in
``before_request_hooks``, the output stage's in ``after_request_hooks``), ``verdict`` every check passed, ``deny``
a request would have been denied (its 446), and ``transformed`` null or, when a check rewrote the text (a
redacting ``default.pii``), the field that was sent as it reads after the rewrite (``{"text"}``,
``{"messages"}`` or ``{"response"}``).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from gateway.guardrails.checks import ParamError
from gateway.guardrails.checks.base import Params, decode_params
from gateway.guardrails.hooks import CompiledHook, SavedRef, compile_saved
from gateway.guardrails.results import HookResults, PhaseOutcome
from gateway.guardrails.saved import SavedGuardrail, json_body, new_guardrail, parse_create
from gateway.guardrails.text import GuardrailAnswer, GuardrailRequest, Subject
from gateway.http.errors import InvalidRequest
from gateway.schema.chat import Message
from gateway.schema.config import Guardrail

#: the endpoint a check's request is judged as (``default.allowedRequestTypes``, the webhook's ``endpoint``)
ENDPOINT = "chat"
#: the name of an inline guardrail in ``hook_results`` and of its request records' ``model``
INLINE = "inline"
STAGES = ("input", "output")

_encoder = msgspec.json.Encoder()


class CheckBody(Params, frozen=True):
    """What to judge (see the module docstring)."""

    stage: str = "input"
    text: str | None = None
    messages: Annotated[list[Message], msgspec.Meta(min_length=1)] | None = None
    model: str | None = None
    response: dict[str, Any] | None = None


class InlineCheckBody(CheckBody, frozen=True):
    """The inline route's body: what to judge and the guardrail itself."""

    guardrail: dict[str, Any] | None = None


class CheckAnswer(msgspec.Struct):
    """The answer of a check."""

    guardrail_id: str | None
    stage: str
    verdict: bool
    deny: bool
    hook_results: HookResults
    transformed: dict[str, Any] | None = None
    object: str = "guardrail.check"


class Check:
    """One validated check: the body as sent (for the request and answer the guardrail judges) and its fields."""

    __slots__ = ("doc", "body", "stage")

    def __init__(self, doc: dict[str, Any], body: CheckBody) -> None:
        self.doc = doc
        self.body = body
        self.stage = body.stage

    @property
    def phase(self) -> str:
        return "before" if self.stage == "input" else "after"

    def subject(self, metadata: dict[str, Any] | None, headers: Any, workspace: str) -> Subject:
        """What the guardrail judges, as a request's hooks see it."""
        body, doc = self.body, self.doc
        request: dict[str, Any] = {}
        if body.model is not None:
            request["model"] = body.model
        if body.messages is not None:
            request["messages"] = doc["messages"]
        elif self.stage == "input":
            request["messages"] = [{"role": "user", "content": body.text}]
        view = GuardrailRequest(request, ENDPOINT, metadata=metadata, headers=headers, workspace=workspace)
        if self.stage == "input":
            return Subject("before", view)
        answer = GuardrailAnswer(json=doc["response"]) if body.response is not None else GuardrailAnswer(
            text=body.text)
        return Subject("after", view, answer)

    def transformed(self, outcome: PhaseOutcome) -> dict[str, Any] | None:
        """The judged field as the guardrail rewrote it, or None when nothing was rewritten."""
        if outcome.text is not None:
            return {"text": outcome.text}
        if outcome.body is None:
            return None
        if self.stage == "output":
            return {"response": outcome.body}
        if self.body.messages is None:
            return {"text": outcome.body["messages"][0]["content"]}
        return {"messages": outcome.body["messages"]}


def _decode(raw: bytes) -> dict[str, Any]:
    doc = json_body(raw, "invalid check")
    if not isinstance(doc, dict):
        raise InvalidRequest("invalid check: the body must be a JSON object", param="body")
    return doc


def _invalid(param: str, detail: str) -> InvalidRequest:
    return InvalidRequest(f"invalid check: {param}: {detail}", param=param)


def _validated(doc: dict[str, Any], shape: type[CheckBody]) -> CheckBody:
    try:
        body: CheckBody = decode_params(shape, doc, "", "field")
    except ParamError as exc:
        raise _invalid(exc.param, exc.detail) from None
    if body.stage not in STAGES:
        raise _invalid("stage", f"must be one of {', '.join(STAGES)}, got {body.stage!r}")
    judged = "response" if body.stage == "output" else "messages"
    if body.stage == "input" and body.response is not None:
        raise _invalid("response", "is judged only at the output stage (send \"stage\": \"output\")")
    if body.text is not None and getattr(body, judged) is not None:
        raise _invalid(judged, f"send either text or {judged}, not both")
    if body.text is None and getattr(body, judged) is None:
        whole = "a chat completion (response)" if judged == "response" else "a chat request's messages (messages)"
        raise _invalid("text", f"send the text to judge (text) or {whole}")
    if body.response is not None and not isinstance(body.response.get("choices"), list):
        raise _invalid("response.choices", "must be an array (the response is a chat completion)")
    return body


def parse_check(raw: bytes) -> Check:
    """The body of ``POST /v1/guardrails/{id}/check``, validated (400 naming the field)."""
    doc = _decode(raw)
    return Check(doc, _validated(doc, CheckBody))


def parse_inline(raw: bytes, workspace: str, organisation: str) -> tuple[Check, SavedGuardrail]:
    """The body of ``POST /v1/guardrails/check``: the check and the guardrail it sends, validated as a saved
    guardrail is (a fault a 400 naming ``guardrail.<field>``)."""
    doc = _decode(raw)
    body = _validated(doc, InlineCheckBody)
    spec = doc.get("guardrail")
    if not isinstance(spec, dict):
        raise _invalid("guardrail", "must be an object: the guardrail's checks, deny, async, on_fail, on_success")
    if "workspace_id" in spec:
        raise _invalid("guardrail.workspace_id", "unknown field (an inline guardrail runs in the key's workspace)")
    try:
        create = parse_create({"name": INLINE, **spec})
    except InvalidRequest as exc:
        param = f"guardrail.{exc.param}" if exc.param and exc.param != "body" else "guardrail"
        detail = exc.message.removeprefix("invalid guardrail: ").removeprefix(f"{exc.param}: ")
        raise _invalid(param, detail) from None
    return Check(doc, body), new_guardrail(create, workspace, organisation, INLINE)


def saved_item(guardrail_id: str) -> SavedRef:
    """The item that runs saved guardrail ``guardrail_id`` as a config's ``input_guardrails`` / ``output_guardrails``
    item naming it does, awaited even when the guardrail is ``async``."""
    return SavedRef(guardrail_id, "guardrail_id", Guardrail(id=guardrail_id, async_=False))


def inline_item(record: SavedGuardrail) -> CompiledHook:
    """The inline guardrail compiled as a saved one (already validated), awaited even when ``async``."""
    try:
        return compile_saved(record, SavedRef(INLINE, "guardrail", Guardrail(id=INLINE, async_=False)))
    except ParamError as exc:
        raise _invalid(f"guardrail.{exc.param}", exc.detail) from None


def answer(guardrail_id: str | None, check: Check, outcome: PhaseOutcome, is_async: bool) -> CheckAnswer:
    """The answer for ``outcome`` (its results marked ``async`` when the guardrail is)."""
    results = HookResults()
    for result in outcome.results:
        result.async_ = is_async
    results.add(outcome)
    return CheckAnswer(guardrail_id, check.stage, outcome.verdict, outcome.deny, results, check.transformed(outcome))


def encode(answer: CheckAnswer) -> bytes:
    return _encoder.encode(answer)
