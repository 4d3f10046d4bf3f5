"""Hooks and guardrail items of a config, and saved guardrails, as one internal form: the compiled hook.

Before the request a config node contributes its ``before_request_hooks`` then its ``input_guardrails``; after it,
``after_request_hooks`` then ``output_guardrails``. Each item becomes a CompiledHook (its checks built and their
parameters validated once) or, when it names a saved guardrail, a SavedRef resolved at request time:
- a string guardrail item is a saved guardrail's id;
- an object guardrail item with checks (``{"default.<check>": {parameters}, "deny": true, ...}``) is inline; one with
  only an ``id`` (and maybe ``deny`` / ``async`` / ``on_fail`` / ``on_success``, which then override the saved
  guardrail's) refers to a saved guardrail;
- a hook with ``checks`` is inline; a hook without ``checks`` refers to the saved guardrail named by its ``id``.
Denying: a guardrail item's ``deny: true`` denies when it fails; ``deny`` inside ``on_fail`` / ``on_success``
denies when that outcome happens. ``async: true`` items never deny (they run after the response has gone), so an
async item that asks to deny is refused when the config is validated.
"""

from __future__ import annotations

from gateway.guardrails.checks import Check, ParamError, build_check
from gateway.guardrails.checks.base import join_path
from gateway.guardrails.saved import SavedGuardrail
from gateway.schema.config import Config, Feedback, Guardrail, Hook, HookOutcome


class CompiledHook:
    """One hook or guardrail, ready to run: its checks (id, Check) in order and what its outcomes do."""

    __slots__ = ("id", "type", "path", "checks", "is_async", "deny_on_fail", "deny_on_success", "on_fail",
                 "on_success")

    def __init__(self, hook_id: str, hook_type: str, path: str, checks: tuple[tuple[str, Check], ...],
                 is_async: bool = False, deny_on_fail: bool = False, deny_on_success: bool = False,
                 on_fail: Feedback | None = None, on_success: Feedback | None = None) -> None:
        self.id = hook_id
        self.type = hook_type
        self.path = path
        self.checks = checks
        self.is_async = is_async
        self.deny_on_fail = deny_on_fail
        self.deny_on_success = deny_on_success
        self.on_fail = on_fail
        self.on_success = on_success

    @property
    def io(self) -> bool:
        return any(check.io for _, check in self.checks)


class SavedRef:
    """A config item that names a saved guardrail; ``overrides`` are the item's own flags (None: none)."""

    __slots__ = ("id", "path", "overrides")

    def __init__(self, guardrail_id: str, path: str, overrides: Guardrail | None = None) -> None:
        self.id = guardrail_id
        self.path = path
        self.overrides = overrides


PlanItem = CompiledHook | SavedRef


def _outcome_flags(on_fail: HookOutcome | None, on_success: HookOutcome | None) -> tuple[bool, bool]:
    return bool(on_fail and on_fail.deny), bool(on_success and on_success.deny)


def _feedback(outcome: HookOutcome | None) -> Feedback | None:
    return outcome.feedback if outcome is not None else None


def _refuse_async_deny(is_async: bool, denies: bool, path: str) -> None:
    if is_async and denies:
        raise ParamError(join_path(path, "async"),
                         "an async item cannot deny: it runs after the response has gone (drop deny or async)")


def compile_hook(hook: Hook, path: str) -> PlanItem:
    """A before/after-request hook as a CompiledHook (or a SavedRef when it has no ``checks``)."""
    if hook.checks is None:
        return SavedRef(hook.id, path, Guardrail(id=hook.id, async_=hook.async_, on_fail=hook.on_fail,
                                                 on_success=hook.on_success))
    checks = []
    for i, item in enumerate(hook.checks):
        at = f"{join_path(path, 'checks')}[{i}]"
        checks.append((item.id, build_check(item.id, item.parameters, f"{at}.parameters", f"{at}.id")))
    deny_fail, deny_success = _outcome_flags(hook.on_fail, hook.on_success)
    is_async = bool(hook.async_)
    _refuse_async_deny(is_async, deny_fail or deny_success, path)
    return CompiledHook(hook.id, hook.type or "guardrail", path, tuple(checks), is_async, deny_fail, deny_success,
                        _feedback(hook.on_fail), _feedback(hook.on_success))


def compile_guardrail(item: str | Guardrail, path: str) -> PlanItem:
    """An input/output guardrail item as a CompiledHook (inline checks) or a SavedRef (an id)."""
    if isinstance(item, str):
        return SavedRef(item, path)
    if not item.checks:
        assert item.id is not None  # the config validator requires an id or a check
        return SavedRef(item.id, path, item)
    checks = tuple((key, build_check(key, params, join_path(path, key))) for key, params in item.checks.items())
    deny_fail, deny_success = _outcome_flags(item.on_fail, item.on_success)
    deny_fail = deny_fail or bool(item.deny)
    is_async = bool(item.async_)
    _refuse_async_deny(is_async, deny_fail or deny_success, path)
    return CompiledHook(item.id or path, "guardrail", path, checks, is_async, deny_fail, deny_success,
                        _feedback(item.on_fail), _feedback(item.on_success))


def compile_saved(record: SavedGuardrail, ref: SavedRef) -> CompiledHook:
    """A saved guardrail (``gateway.guardrails.saved.SavedGuardrail``) as the CompiledHook for ``ref``: the record's
    checks and flags, with the referring item's own flags over them. ParamError names the record's field."""
    checks = tuple(
        (c.id, build_check(c.id, c.parameters, f"checks[{i}].parameters", f"checks[{i}].id"))
        for i, c in enumerate(record.checks)
    )
    over = ref.overrides
    deny = over.deny if over is not None and over.deny is not None else record.deny
    is_async = over.async_ if over is not None and over.async_ is not None else record.async_
    on_fail = over.on_fail if over is not None and over.on_fail is not None else record.on_fail
    on_success = over.on_success if over is not None and over.on_success is not None else record.on_success
    deny_fail, deny_success = _outcome_flags(on_fail, on_success)
    deny_fail = deny_fail or bool(deny)
    is_async = bool(is_async)
    _refuse_async_deny(is_async, deny_fail or deny_success, ref.path)
    return CompiledHook(record.id, "guardrail", ref.path, checks, is_async, deny_fail, deny_success,
                        _feedback(on_fail), _feedback(on_success))


def compile_phase(config: Config, phase: str) -> tuple[PlanItem, ...]:
    """Every hook and guardrail item of one config node for ``phase`` (``before`` or ``after``), in order."""
    if phase == "before":
        hooks, guardrails = config.before_request_hooks, config.input_guardrails
        hook_name, guardrail_name = "before_request_hooks", "input_guardrails"
    else:
        hooks, guardrails = config.after_request_hooks, config.output_guardrails
        hook_name, guardrail_name = "after_request_hooks", "output_guardrails"
    items: list[PlanItem] = []
    for i, hook in enumerate(hooks or ()):
        items.append(compile_hook(hook, f"{hook_name}[{i}]"))
    for i, item in enumerate(guardrails or ()):
        items.append(compile_guardrail(item, f"{guardrail_name}[{i}]"))
    return tuple(items)


def validate_hook(hook: Hook, path: str) -> None:
    """Build a hook's checks to validate their ids and parameters (ParamError naming the path of the fault)."""
    compile_hook(hook, path)


def validate_guardrail(item: str | Guardrail, path: str) -> None:
    """Build a guardrail item's checks to validate them (ParamError naming the path of the fault)."""
    compile_guardrail(item, path)
