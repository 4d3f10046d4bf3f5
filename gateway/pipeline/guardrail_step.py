"""The guardrail step of one request: the node's before-request hooks and input guardrails before an attempt (once
per request for the same items; a deny is a 446, a redaction rewrites the body), the output checks on the answer,
and what the request's log line carries (every result, async ones included, and the feedback)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.guardrails import (
    FeedbackRecord,
    GuardrailAnswer,
    GuardrailRequest,
    GuardrailRunner,
    HookResult,
    HookResults,
    PhaseOutcome,
)
from gateway.http.context import RequestContext
from gateway.http.errors import InvalidRequest
from gateway.routing.plan import Node

log = logging.getLogger("gateway.guardrails")


def declared(exc: InvalidRequest, node: Node) -> InvalidRequest:
    """``exc`` (raised for an item of ``node``'s hooks or guardrails, its ``param`` relative to the node, such as
    ``input_guardrails[1]``) with ``param`` and message naming the item's path in the whole config, where it is
    declared: the highest of the node's parents that holds the same (inherited) list, e.g.
    ``targets[1].input_guardrails[1]``. The path ``POST /v1/configs/validate`` names."""
    param = exc.param
    if not param or node.parent is None:
        return exc
    field = param.split("[", 1)[0].split(".", 1)[0]
    items = getattr(node.config, field, None)
    if items is None:
        return exc
    at = node
    while at.parent is not None and getattr(at.parent.config, field, None) is items:
        at = at.parent
    base = at.path.partition(".")[2]  # "config.targets[1]" -> "targets[1]"; the root "config" -> ""
    if not base:
        return exc
    full = f"{base}.{param}"
    return InvalidRequest(exc.message.replace(param, full, 1) if param in exc.message else exc.message, param=full)


class GuardrailStep:
    """One request's guardrail state: the results and feedback so far, the async items still running, the input
    phases already run (by the lists they ran), and the attempt's node and request view."""

    __slots__ = ("runner", "ctx", "endpoint", "stream", "results", "feedback", "background", "async_results",
                 "_before", "node", "view")

    def __init__(self, runner: GuardrailRunner, ctx: RequestContext, endpoint: str, stream: bool) -> None:
        self.runner = runner
        self.ctx = ctx
        self.endpoint = endpoint
        self.stream = stream
        self.results = HookResults()
        self.feedback: list[FeedbackRecord] = []
        #: (phase, task) of async items; their results once done
        self.background: list[tuple[str, asyncio.Task[HookResult | None]]] = []
        self.async_results: list[tuple[str, HookResult]] = []
        self._before: dict[tuple[int, int], PhaseOutcome] = {}
        self.node: Node | None = None
        self.view: GuardrailRequest | None = None

    def begin(self, node: Node) -> None:
        self.node = node

    def _view(self, doc: dict) -> GuardrailRequest:
        ctx = self.ctx
        return GuardrailRequest(doc, self.endpoint, metadata=ctx.metadata, headers=ctx.raw_headers,
                                stream=self.stream, workspace=ctx.workspace or "default")

    async def before(self, node: Node, doc: dict) -> dict | None:
        """The node's input phase on ``doc``: the redacted document when an item rewrote it (else None); raises the
        446 of a deny."""
        self.node = node
        self.view = self._view(doc)
        config = node.config
        runner = self.runner
        if not runner.has_before(config):
            return None
        key = (id(config.before_request_hooks), id(config.input_guardrails))
        phase = self._before.get(key)
        if phase is None:
            try:
                phase = self._before[key] = await runner.before(config, self.view)
            except InvalidRequest as exc:
                raise declared(exc, node) from None
            self.add(phase)
            if phase.deny:
                raise self.results.denied()
        if phase.body is None:
            return None
        self.view = self._view(phase.body)
        return phase.body

    def has_after(self, node: Node | None) -> bool:
        """Whether ``node`` (the attempt's) has after-request hooks or output guardrails."""
        return node is not None and node.has_steps and self.runner.has_after(node.config)

    async def may_change(self) -> bool:
        """Whether an output item of the attempt's node can deny or redact (then a stream is held)."""
        node = self.node
        if node is None or self.view is None:
            return False
        try:
            return await self.runner.after_may_change(node.config, self.view)
        except InvalidRequest as exc:
            raise declared(exc, node) from None

    async def after(self, answer: GuardrailAnswer) -> PhaseOutcome:
        """The output phase on ``answer``; raises the 446 of a deny."""
        assert self.node is not None and self.view is not None
        try:
            phase = await self.runner.after(self.node.config, self.view, answer)
        except InvalidRequest as exc:
            raise declared(exc, self.node) from None
        self.add(phase)
        if phase.deny:
            raise self.results.denied()
        return phase

    def add(self, phase: PhaseOutcome) -> None:
        self.results.add(phase)
        self.feedback.extend(phase.feedback)
        for task in phase.background:
            self.background.append((phase.phase, task))

    async def settle(self, flowed: dict[str, Any] | None) -> None:
        """Run a flowed stream's output checks and wait for the async items (at most ``wait_s``)."""
        if flowed is not None:
            assert self.node is not None and self.view is not None
            self.add(await self.runner.after(self.node.config, self.view, GuardrailAnswer(json=flowed)))
        if self.background:
            done = await asyncio.gather(*(task for _, task in self.background), return_exceptions=True)
            for (phase_name, _), result in zip(self.background, done):
                if isinstance(result, HookResult):
                    self.async_results.append((phase_name, result))
                    if result.feedback is not None:
                        fb = result.feedback
                        self.feedback.append(FeedbackRecord(result.id, result.verdict, fb.value, fb.weight,
                                                            fb.metadata))

    def log_view(self) -> dict[str, Any] | None:
        """What the request log line carries: every hook result (async ones included) and the feedback."""
        if not (self.results.ran or self.async_results or self.feedback):
            return None
        before = list(self.results.before_request_hooks)
        after = list(self.results.after_request_hooks)
        for phase_name, result in self.async_results:
            (before if phase_name == "before" else after).append(result)
        return {"before_request_hooks": before, "after_request_hooks": after, "feedback": self.feedback}
