"""Guardrails checked directly: ``POST /v1/guardrails/{guardrail_id}/check`` (a saved guardrail of the key's
workspace) and ``POST /v1/guardrails/check`` (an inline one), under the ``guardrails.invoke`` scope (any role).

Per request, in order: the gateway key (the one authentication function) with ``guardrails.invoke`` (401, 403
``missing_scope``); a ``workspace_id`` query naming another workspace is the 404 of a workspace the key cannot see;
the saved guardrail (another workspace's id, or an unknown one: 404 ``guardrail_id``); the body (at most
GATEWAY_MAX_BODY_BYTES, 413 beyond) validated (``gateway.guardrails.direct``, 400 naming the field); the workspace's
rate-limit and usage-limit policies (provider ``guardrails``, model the guardrail's id or ``inline``: 429 when one is
spent); then the guardrail, through the worker's runner, answered 200 with its verdict whatever it is (a deny is
``"deny": true`` in a 200: the check ran; the 446 is what a request would have got).

Every check past authentication is a request record (``/v1/logs``, the log stream, aggregates, metrics): endpoint
``guardrails.check``, provider ``guardrails``, model the guardrail's id or ``inline``, its status and latency, the
client's ``x-gateway-metadata`` plus ``guardrail_id``, ``guardrail_stage``, ``guardrail_verdict`` and
``guardrail_deny``, and ``hook_results`` (with ``feedback``) as a request's log line carries them. A refused check
(400, 404, 413, 429) is recorded with its error. The id ``check`` is no saved guardrail's (their ids are
``gr_<uuid>``): ``/v1/guardrails/check`` is this route for ``POST`` and a 405 for the record methods.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from gateway.api.admin import GUARDRAILS, own_workspace_key
from gateway.bounded_cache import BoundedCache
from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.guardrails import direct
from gateway.guardrails.hooks import PlanItem, SavedRef
from gateway.guardrails.results import FeedbackRecord, HookResults, PhaseOutcome
from gateway.guardrails.runner import GuardrailRunner
from gateway.guardrails.saved_cache import SavedGuardrailCache
from gateway.http.body import read_request_body
from gateway.http.context import RequestContext, build_context
from gateway.http.errors import GatewayError, NotFound
from gateway.http.respond import CACHE_DISABLED, gateway_headers, send_error, send_json
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.observability.record import RequestRecord

SCOPE = "guardrails.invoke"
ENDPOINT = "guardrails.check"
PROVIDER = GUARDRAILS
#: saved guardrails whose items this worker keeps (the runner caches each item's compiled form by the item)
ITEMS_MAX = 1024


class Guardrails:
    """What the routes use of the worker's guardrail steps (made at first use): the runner and the saved cache."""

    def __init__(self, runner: Callable[[], GuardrailRunner], saved: Callable[[], SavedGuardrailCache]) -> None:
        self.runner = runner
        self.saved = saved


class CheckLog:
    """A check's ``hook_results`` as the request log line carries a request's (``RequestRecord.hooks``)."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: PhaseOutcome) -> None:
        self.outcome = outcome

    def log_view(self) -> dict[str, Any]:
        results = HookResults()
        results.add(self.outcome)
        feedback: list[FeedbackRecord] = self.outcome.feedback
        return {"before_request_hooks": results.before_request_hooks,
                "after_request_hooks": results.after_request_hooks, "feedback": feedback}


class GuardrailCheckEndpoint:
    """The two check routes (see the module docstring)."""

    def __init__(self, keys: KeyStore, guardrails: Guardrails, max_body: int, recorder: Any, policies: Any) -> None:
        self.keys = keys
        self.guardrails = guardrails
        self.max_body = max_body
        self.recorder = recorder
        self.policies = policies
        self._items: BoundedCache[str, SavedRef] = BoundedCache(ITEMS_MAX)

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [("POST", "/v1/guardrails/check", self.inline),
                ("POST", "/v1/guardrails/{guardrail_id}/check", self.saved)]

    async def saved(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        guardrail_id = scope["path_params"]["guardrail_id"]
        ctx, key = await self._caller(scope)
        record = _record(ctx, key, guardrail_id, started)
        try:
            found = await self.guardrails.saved().resolve(guardrail_id, key.workspace)
            if found is None:
                raise NotFound(f"no guardrail '{guardrail_id}' in this workspace", param="guardrail_id")
            check = direct.parse_check(await read_request_body(scope, receive, self.max_body))
            item = self._items.get(guardrail_id)
            if item is None:
                item = self._items[guardrail_id] = direct.saved_item(guardrail_id)
            await self._run(send, ctx, key, record, guardrail_id, check, item, found.async_)
        except GatewayError as exc:
            await self._refused(send, record, exc)

    async def inline(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        ctx, key = await self._caller(scope)
        record = _record(ctx, key, direct.INLINE, started)
        try:
            body = await read_request_body(scope, receive, self.max_body)
            check, guardrail = direct.parse_inline(body, key.workspace, key.organisation)
            item = direct.inline_item(guardrail)
            await self._run(send, ctx, key, record, None, check, item, guardrail.async_)
        except GatewayError as exc:
            await self._refused(send, record, exc)

    # -- the steps -------------------------------------------------------------------------------------------------

    async def _caller(self, scope: Scope) -> tuple[RequestContext, KeyRecord]:
        """The caller's key (``guardrails.invoke``); the routes serve the key's own workspace, so a query naming
        another is the 404 of a workspace it cannot see."""
        ctx = build_context(scope["headers"])
        return ctx, await own_workspace_key(self.keys, ctx, scope, SCOPE, "the guardrail checks")

    async def _run(self, send: Send, ctx: RequestContext, key: KeyRecord, record: RequestRecord,
                   guardrail_id: str | None, check: direct.Check, item: PlanItem, is_async: bool) -> None:
        policies = self.policies
        hold = None
        if policies is not None and policies.may_apply(key.workspace):
            hold = await policies.admit_as(ctx, None, 0, PROVIDER, record.model)
        subject = check.subject(ctx.metadata, ctx.raw_headers, key.workspace)
        outcome = await self.guardrails.runner().run_phase((item,), subject)
        answer = direct.answer(guardrail_id, check, outcome, is_async)
        await send_json(send, 200, direct.encode(answer), [*gateway_headers(ctx.trace_id), CACHE_DISABLED])
        record.status = 200
        record.hooks = CheckLog(outcome)
        record.metadata = {**(ctx.metadata or {}), "guardrail_id": record.model, "guardrail_stage": check.stage,
                           "guardrail_verdict": answer.verdict, "guardrail_deny": answer.deny}
        self._done(record, hold)

    async def _refused(self, send: Send, record: RequestRecord, exc: GatewayError) -> None:
        await send_error(send, exc, [*gateway_headers(record.trace_id), CACHE_DISABLED])
        record.status = exc.status
        record.error = exc.message
        record.metadata = {**(record.metadata or {}), "guardrail_id": record.model}
        self._done(record, None)

    def _done(self, record: RequestRecord, hold: Any) -> None:
        record.total_s = time.perf_counter() - record.started
        if hold is not None:
            self.policies.finish(hold, record)
        self.recorder.record(record)


def _record(ctx: RequestContext, key: KeyRecord, model: str, started: float) -> RequestRecord:
    record = RequestRecord(ctx.trace_id, ENDPOINT, started)
    record.workspace = key.workspace
    record.provider = PROVIDER
    record.model = model
    record.metadata = dict(ctx.metadata) if ctx.metadata else None
    record.request_headers = ctx.raw_headers
    record.sensitive_headers = ctx.sensitive_headers
    record.span_id = ctx.span_id
    record.parent_span_id = ctx.parent_span_id
    return record


__all__ = ["GuardrailCheckEndpoint", "Guardrails"]
