"""The hook runner: runs a config node's hooks and guardrails before or after a request and says what follows.

Per phase: the node's items are compiled once per config object (cached by identity) and saved guardrails are
resolved through the caller's ``resolve_saved`` callback. Checks that wait on the network (webhook, JWKS) run
concurrently; cheap CPU checks run inline; a CPU check on a large input (or a large JSON schema) runs in a bounded
thread pool (GATEWAY_GUARDRAIL_WORKERS threads, at most GATEWAY_GUARDRAIL_QUEUE jobs waiting or running per worker
process). When that pool is full the check is not run and counts as failed, with an explanation saying so: a guard
never passes unchecked. ``async: true`` items run in the background (at most GATEWAY_GUARDRAIL_ASYNC_MAX at once per
worker process; beyond that they are dropped with a warning) and their results go to the ``gateway.guardrails``
log (or the ``on_background`` callback), never into the response; the phase's ``background`` tasks resolve to
those results for a caller that wants to log them with the request. A check that raises counts as failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.guardrails.checks import Check, ParamError
from gateway.guardrails.checks.base import OFFLOAD_CHARS, Verdict, join_path
from gateway.guardrails.hooks import CompiledHook, PlanItem, SavedRef, compile_phase, compile_saved
from gateway.guardrails.results import CheckResult, FeedbackRecord, HookResult, PhaseOutcome
from gateway.guardrails.saved import SavedGuardrail
from gateway.guardrails.text import GuardrailAnswer, GuardrailRequest, Subject, replace_segments
from gateway.guardrails.webhook import CheckIO
from gateway.http.errors import InvalidRequest
from gateway.schema.config import Config
from gateway.settings import Settings
from gateway.task_set import BoundedTasks
from gateway.upstream.client import UpstreamClient

log = logging.getLogger("gateway.guardrails")

#: (guardrail id, workspace) -> the saved record (``gateway.guardrails.saved.SavedGuardrail``) or None
SavedResolver = Callable[[str, str], Awaitable[Any]]
PLAN_CACHE_MAX = 4096
SAVED_CACHE_MAX = 1024


def _timed(check_id: str, check: Check, subject: Subject) -> CheckResult:
    started = time.perf_counter()
    try:
        verdict = check.run(subject)
    except Exception as exc:  # a broken check fails closed, it never breaks the request
        log.exception("guardrail check %s raised", check_id)
        verdict = Verdict(False, f"the check could not run: {exc.__class__.__name__}: {exc}")
    return _result(check_id, verdict, started)


def _result(check_id: str, verdict: Verdict, started: float) -> CheckResult:
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    return CheckResult(check_id, verdict.verdict, verdict.explanation, elapsed, verdict.data)


class GuardrailRunner:
    """Runs hooks and guardrails for one worker process; built once at startup, closed at shutdown."""

    def __init__(self, settings: Settings, client: UpstreamClient | None = None,
                 resolve_saved: SavedResolver | None = None,
                 on_background: Callable[[str, HookResult], None] | None = None) -> None:
        self.io = CheckIO(client)
        self.resolve_saved = resolve_saved
        self.on_background = on_background or _log_background
        self.workers = settings.guardrail_workers
        self.queue_max = settings.guardrail_queue
        self._executor: ThreadPoolExecutor | None = None
        self._queued = 0
        self._plans: BoundedCache[int, tuple[Config, tuple[PlanItem, ...], tuple[PlanItem, ...]]] = BoundedCache(
            PLAN_CACHE_MAX)
        self._saved: BoundedCache[tuple[int, str, str], tuple[SavedRef, Any, CompiledHook]] = BoundedCache(
            SAVED_CACHE_MAX)
        self._background: BoundedTasks[HookResult | None] = BoundedTasks(settings.guardrail_async_max)

    # --- what the pipeline calls --------------------------------------------------------------------------------

    @staticmethod
    def has_before(config: Config) -> bool:
        """Whether the node has anything to run before the request (no cost otherwise)."""
        return config.before_request_hooks is not None or config.input_guardrails is not None

    @staticmethod
    def has_after(config: Config) -> bool:
        """Whether the node has anything to run on the answer."""
        return config.after_request_hooks is not None or config.output_guardrails is not None

    async def before(self, config: Config, request: GuardrailRequest) -> PhaseOutcome:
        """Run ``before_request_hooks`` and ``input_guardrails`` on the request."""
        return await self.run_phase(self.plan(config, "before"), Subject("before", request))

    async def after(self, config: Config, request: GuardrailRequest, answer: GuardrailAnswer) -> PhaseOutcome:
        """Run ``after_request_hooks`` and ``output_guardrails`` on the answer."""
        return await self.run_phase(self.plan(config, "after"), Subject("after", request, answer))

    async def after_may_change(self, config: Config, request: GuardrailRequest) -> bool:
        """Whether the node's after-request items can deny or rewrite (redact) the answer: a stream must then be
        held until its whole answer is seen. Saved guardrails are resolved (cached) to know."""
        for item in self.plan(config, "after"):
            hook = await self._resolve(item, request) if isinstance(item, SavedRef) else item
            if hook.is_async:
                continue
            if hook.deny_on_fail or hook.deny_on_success or any(check.redacts for _, check in hook.checks):
                return True
        return False

    async def close(self) -> None:
        """Cancel background hooks and stop the worker threads."""
        await self._background.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # --- plans --------------------------------------------------------------------------------------------------

    def plan(self, config: Config, phase: str) -> tuple[PlanItem, ...]:
        """The node's compiled items for ``phase``: compiled on first use per config object, then reused."""
        hit = self._plans.get(id(config))
        if hit is None or hit[0] is not config:
            try:
                hit = (config, compile_phase(config, "before"), compile_phase(config, "after"))
            except ParamError as exc:
                raise InvalidRequest(f"invalid config: {exc.param}: {exc.detail}", param=exc.param) from None
            self._plans[id(config)] = hit
        return hit[1] if phase == "before" else hit[2]

    async def _resolve(self, ref: SavedRef, request: GuardrailRequest) -> CompiledHook:
        record = await self._record(ref, request.workspace, ref.path)
        key = (id(ref), request.workspace, record.id)
        hit = self._saved.get(key)
        if hit is not None and hit[0] is ref and (hit[1] is record or hit[1] == record):
            return hit[2]
        hook = _compiled_saved(record, ref, ref.path)
        self._saved[key] = (ref, record, hook)
        return hook

    async def _record(self, ref: SavedRef, workspace: str, param: str) -> Any:
        record = await self.resolve_saved(ref.id, workspace) if self.resolve_saved is not None else None
        if record is None:
            raise InvalidRequest(f"unknown guardrail {ref.id!r} (no saved guardrail has that id in this workspace)",
                                 param=param)
        return record

    async def check_saved(self, refs: list[tuple[str, SavedRef]], workspace: str) -> None:
        """Resolve and compile each ``(JSON path, ref)`` of ``saved_refs`` in ``workspace`` as a request does,
        remembering nothing: an unknown id (or another workspace's) or a record the item's flags cannot use is the
        400 a request gets, whose ``param`` is the item's path in the whole config."""
        for path, ref in refs:
            _compiled_saved(await self._record(ref, workspace, path), ref, path)

    # --- running ------------------------------------------------------------------------------------------------

    async def run_phase(self, items: tuple[PlanItem, ...], subject: Subject) -> PhaseOutcome:
        """Run compiled items on ``subject``: synchronous hooks now, async ones in the background."""
        outcome = PhaseOutcome(subject.phase)
        if not items:
            return outcome
        hooks: list[CompiledHook] = []
        for item in items:
            hook = await self._resolve(item, subject.request) if isinstance(item, SavedRef) else item
            if hook.is_async:
                task = self._spawn(hook, subject)
                if task is not None:
                    outcome.background.append(task)
            else:
                hooks.append(hook)
        if not hooks:
            return outcome
        rows = await self._run_checks(hooks, subject)
        redactors: list[Check] = []
        for hook, row in zip(hooks, rows):
            result = _hook_result(hook, row)
            for (_, check), check_result in zip(hook.checks, row):
                if check.redacts and check_result.data:
                    redactors.append(check)
                    result.transformed = True
            outcome.results.append(result)
            if not result.verdict:
                outcome.verdict = False
            if result.deny and not outcome.deny:
                outcome.deny = True
                outcome.denied_by = result
            if result.feedback is not None:
                fb = result.feedback
                outcome.feedback.append(FeedbackRecord(hook.id, result.verdict, fb.value, fb.weight, fb.metadata))
        if redactors and not outcome.deny:
            await self._redact(redactors, subject, outcome)
        return outcome

    async def _run_checks(self, hooks: list[CompiledHook], subject: Subject) -> list[list[CheckResult]]:
        rows: list[list[Any]] = []
        waits: list[tuple[int, int, Awaitable[CheckResult]]] = []
        for h, hook in enumerate(hooks):
            row: list[Any] = [None] * len(hook.checks)
            for c, (check_id, check) in enumerate(hook.checks):
                if check.io:
                    waits.append((h, c, self._run_io(check_id, check, subject)))
                elif check.offload(subject):
                    waits.append((h, c, self._run_offloaded(check_id, check, subject)))
                else:
                    row[c] = _timed(check_id, check, subject)
            rows.append(row)
        if waits:
            done = await asyncio.gather(*(w[2] for w in waits))
            for (h, c, _), result in zip(waits, done):
                rows[h][c] = result
        return rows

    async def _run_io(self, check_id: str, check: Check, subject: Subject) -> CheckResult:
        started = time.perf_counter()
        try:
            verdict = await check.run_io(subject, self.io)
        except Exception as exc:  # fails closed, like _timed
            log.exception("guardrail check %s raised", check_id)
            verdict = Verdict(False, f"the check could not run: {exc.__class__.__name__}: {exc}")
        return _result(check_id, verdict, started)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="guardrail")
        return self._executor

    async def _run_offloaded(self, check_id: str, check: Check, subject: Subject) -> CheckResult:
        if self._queued >= self.queue_max:
            return CheckResult(check_id, False, "not run: the guardrail worker pool is full "
                                                "(GATEWAY_GUARDRAIL_QUEUE); the check counts as failed", 0.0)
        self._queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool(), _timed, check_id, check, subject)
        finally:
            self._queued -= 1

    async def _redact(self, redactors: list[Check], subject: Subject, outcome: PhaseOutcome) -> None:
        segments = subject.segments()
        texts = [text for _, text in segments]

        def apply() -> list[str]:
            out = texts
            for check in redactors:
                out = check.redact(out)
            return out

        if sum(len(t) for t in texts) > OFFLOAD_CHARS:
            texts = await asyncio.get_running_loop().run_in_executor(self._pool(), apply)
        else:
            texts = apply()
        if segments and segments[0][0] is None:
            outcome.text = texts[0]
        elif subject.phase == "before":
            outcome.body = replace_segments(subject.request.body, segments, texts)
        else:
            assert subject.answer is not None  # the after phase always has the answer
            outcome.body = replace_segments(subject.answer.json, segments, texts)

    # --- async items --------------------------------------------------------------------------------------------

    def _spawn(self, hook: CompiledHook, subject: Subject) -> asyncio.Task[HookResult | None] | None:
        task = self._background.spawn(lambda: self._run_background(hook, subject))
        if task is None:
            log.warning("async guardrail %s dropped: %d already running (GATEWAY_GUARDRAIL_ASYNC_MAX)",
                        hook.id, len(self._background))
        return task

    async def _run_background(self, hook: CompiledHook, subject: Subject) -> HookResult | None:
        try:
            row = (await self._run_checks([hook], subject))[0]
            result = _hook_result(hook, row)
            result.async_ = True
            self.on_background(subject.phase, result)
            return result
        except asyncio.CancelledError:
            raise
        except Exception:  # nobody needs to await this task: log instead of losing the error
            log.exception("async guardrail %s failed", hook.id)
            return None


def _compiled_saved(record: SavedGuardrail, ref: SavedRef, param: str) -> CompiledHook:
    """``record`` compiled for ``ref``; a fault is a 400 whose ``param`` is ``param`` (where ``ref`` stands)."""
    try:
        return compile_saved(record, ref)
    except ParamError as exc:
        where = param + exc.param[len(ref.path):] if exc.param.startswith(ref.path) else exc.param
        raise InvalidRequest(f"saved guardrail {ref.id!r} is not valid: {where}: {exc.detail}",
                             param=param) from None


def saved_refs(config: Config, path: str = "") -> list[tuple[str, SavedRef]]:
    """Every item naming a saved guardrail in ``config`` and its targets at any depth, with its JSON path
    (``targets[1].input_guardrails[0]``), in the order they appear. For configs that are only checked (validate,
    save); a request resolves the items of the node it runs instead."""
    found: list[tuple[str, SavedRef]] = []
    if GuardrailRunner.has_before(config) or GuardrailRunner.has_after(config):
        for phase in ("before", "after"):
            try:
                items = compile_phase(config, phase)
            except ParamError as exc:
                param = join_path(path, exc.param)
                raise InvalidRequest(f"invalid config: {param}: {exc.detail}", param=param) from None
            found.extend((join_path(path, item.path), item) for item in items if isinstance(item, SavedRef))
    for i, target in enumerate(config.targets or ()):
        found.extend(saved_refs(target, f"{join_path(path, 'targets')}[{i}]"))
    return found


def _hook_result(hook: CompiledHook, row: list[CheckResult]) -> HookResult:
    verdict = all(result.verdict for result in row)
    deny = hook.deny_on_success if verdict else hook.deny_on_fail
    elapsed = round(sum(result.execution_time for result in row), 3)
    feedback = hook.on_success if verdict else hook.on_fail
    return HookResult(hook.id, hook.type, verdict, deny, elapsed, row, feedback=feedback)


def _log_background(phase: str, result: HookResult) -> None:
    log.info("async %s hook %s: %s", "before-request" if phase == "before" else "after-request", result.id,
             msgspec.json.encode(result).decode())
