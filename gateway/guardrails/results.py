"""What running hooks produces: per-check and per-hook results, the ``hook_results`` object, and its statuses.

``hook_results`` is ``{"before_request_hooks": [...], "after_request_hooks": [...]}``; each item is a hook's
result: ``id``, ``type``, ``verdict``, ``deny`` (this hook's outcome denies the request), ``async``,
``execution_time`` (milliseconds), ``transformed`` (it redacted the text), ``feedback`` (the ``on_fail`` or
``on_success`` feedback that applied, or null) and ``checks``: each check's ``id``, ``verdict``, ``explanation``,
``execution_time`` (milliseconds) and, for some checks, ``data``. Async hooks do not appear (they are logged).

Statuses: any denying hook -> 446 (the error envelope plus ``hook_results``); any failed hook that does not deny ->
246 (the answer plus ``hook_results``); all passing -> 200 (plus ``hook_results`` when any hook ran).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http.errors import GuardrailDenied
from gateway.schema.config import Feedback

STATUS_DENIED = 446
STATUS_FAILED = 246

_encoder = msgspec.json.Encoder()


class CheckResult(msgspec.Struct, omit_defaults=True, gc=False):
    """One check's result inside a hook's result."""

    id: str
    verdict: bool
    explanation: str
    execution_time: float
    data: Any = None


class HookResult(msgspec.Struct):
    """One hook's result: its checks' results and what its outcome does."""

    id: str
    type: str
    verdict: bool
    deny: bool
    execution_time: float
    checks: list[CheckResult]
    async_: bool = msgspec.field(default=False, name="async")
    transformed: bool = False
    feedback: Feedback | None = None


class FeedbackRecord(msgspec.Struct, gc=False):
    """A feedback value an ``on_fail`` / ``on_success`` asked to record, with the hook that gave it."""

    hook_id: str
    verdict: bool
    value: float | int | None = None
    weight: float | int | None = None
    metadata: dict[str, Any] | None = None


class PhaseOutcome:
    """The outcome of one phase (before or after the request).

    ``results``: the synchronous hooks' results; ``verdict``: every one of them passed; ``deny``: one of them
    denies (``denied_by`` is the first); ``feedback``: the feedback records; ``body``: the request body (before)
    or answer JSON (after) with redactions applied, None when nothing was redacted; ``text``: the answer text with
    redactions applied when the caller gave the text (an assembled stream), else None; ``background``: the tasks
    of the phase's async hooks, each resolving to its HookResult (None when it failed to run).
    """

    __slots__ = ("phase", "results", "verdict", "deny", "denied_by", "feedback", "body", "text", "background")

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.results: list[HookResult] = []
        self.verdict = True
        self.deny = False
        self.denied_by: HookResult | None = None
        self.feedback: list[FeedbackRecord] = []
        self.body: Any = None
        self.text: str | None = None
        self.background: list[Any] = []

    @property
    def transformed(self) -> bool:
        return self.body is not None or self.text is not None


class HookResults(msgspec.Struct):
    """The ``hook_results`` object of a response (see the module docstring)."""

    before_request_hooks: list[HookResult] = []
    after_request_hooks: list[HookResult] = []

    def add(self, outcome: PhaseOutcome) -> None:
        """Record a phase's synchronous results."""
        if outcome.phase == "before":
            self.before_request_hooks.extend(outcome.results)
        else:
            self.after_request_hooks.extend(outcome.results)

    @property
    def ran(self) -> bool:
        """Whether any hook ran (the answer then carries ``hook_results``)."""
        return bool(self.before_request_hooks or self.after_request_hooks)

    def _all(self) -> list[HookResult]:
        return self.before_request_hooks + self.after_request_hooks

    @property
    def status(self) -> int:
        """446 when a hook denies, 246 when one failed without denying, else 200."""
        results = self._all()
        if any(r.deny for r in results):
            return STATUS_DENIED
        if any(not r.verdict for r in results):
            return STATUS_FAILED
        return 200

    def denied(self) -> GuardrailDenied:
        """The 446 error for these results (call when ``status`` is 446)."""
        first = next((r for r in self._all() if r.deny), None)
        if first is None:
            reason = "a guardrail denied the request"
        else:
            failed = [c for c in first.checks if not c.verdict]
            detail = f": {failed[0].id}: {failed[0].explanation}" if failed else " (it passed, and denies on success)"
            reason = f"the request was denied by guardrail {first.id!r}{detail}"
        return GuardrailDenied(f"{reason}. See hook_results for every check.", extra={"hook_results": self})

    def encode(self) -> bytes:
        return _encoder.encode(self)


def attach_hook_results(body: bytes, results: HookResults) -> bytes:
    """A JSON object answer with ``"hook_results": {...}`` added as its last member."""
    end = body.rstrip()
    if not end.endswith(b"}"):
        raise ValueError("the answer is not a JSON object")
    inner = end[:-1].rstrip()
    joiner = b"" if inner.endswith(b"{") else b","
    return inner + joiner + b'"hook_results":' + results.encode() + b"}"


def attach_hook_results_to_event(chunk: bytes, results: HookResults) -> bytes:
    """An SSE chunk with ``hook_results`` added to the JSON object of its first ``data:`` event (the first chunk of
    a stream carries it). A chunk without such an event gets a ``data: {"hook_results": ...}`` event in front."""
    start = 0
    while True:
        at = chunk.find(b"data:", start)
        if at < 0:
            break
        if at == 0 or chunk[at - 1:at] == b"\n":
            line_end = chunk.find(b"\n", at)
            line_end = len(chunk) if line_end < 0 else line_end
            payload = chunk[at + 5:line_end].strip()
            if payload.startswith(b"{") and payload.endswith(b"}"):
                data = chunk[at:line_end].rstrip(b"\r")
                rewritten = b"data: " + attach_hook_results(payload, results)
                return chunk[:at] + rewritten + chunk[at + len(data):]
        start = at + 5
    return b'data: {"hook_results":' + results.encode() + b"}\n\n" + chunk
