"""Saved guardrails (``/v1/guardrails``): the record, its create/update bodies and their validation, and listing.

A saved guardrail is a control-plane record (``gateway.controlplane.records.Entity``: ``id``, ``workspace_id``,
``organisation_id``, ``created_at``, ``last_updated_at``) with ``name`` (1..255 characters), ``checks`` (a
non-empty array of ``{"id": "default.<check>", "parameters": {...}}``, each validated like a config's), ``deny``
(deny the request when it fails), ``async``, ``on_fail`` / ``on_success`` (``{"feedback": {"value", "weight",
"metadata"}, "deny"}``). Ids look like ``gr_<uuid>``. A config names it by id (``"input_guardrails": ["gr_..."]``);
an async guardrail cannot deny. A bad body is a 400 whose ``param`` is the field's path
(``checks[0].parameters.rule``).

Credentials in a guardrail's checks (every ``default.webhook`` header value, a ``default.jwt`` ``secret``) are
sealed at rest and masked in every answer, as a saved config's are (``gateway.controlplane.sealing``): the stored
``checks`` show them masked and ``sealed`` holds them, bound to the record's workspace and id. ``opened`` gives the
record a request runs (the per-worker cache opens it once per load); a masked value sent back keeps the secret
stored at the same place; a record saved in clear by an older release is sealed the first time it is read.

Listing: ``current_page`` (integer >= 0, default 0, the first page is 0), ``page_size`` (1..PAGE_SIZE_MAX, default
PAGE_SIZE_DEFAULT) and ``ids`` (comma-separated ids; only those are listed). Newest first (``created_at``, then
``id``). The answer is ``{"object": "list", "data": [...], "total": N, "current_page", "page_size", "has_more"}``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import msgspec

from gateway.controlplane import sealing, secret_hosts
from gateway.controlplane.records import DEFAULT_ORGANISATION, Entity, Repository
from gateway.controlplane.secrets import SecretBox
from gateway.guardrails.checks import ParamError, build_check
from gateway.guardrails.checks.base import Params, decode_params
from gateway.http.errors import InvalidRequest
from gateway.schema.common import is_not_utf8
from gateway.schema.config import HookOutcome

KIND = "guardrail"
ID_PREFIX = "gr_"
PAGE_SIZE_DEFAULT = 100
PAGE_SIZE_MAX = 1000
NAME_MAX = 255  # as every other record's name
CHECKS_MAX = 64

_encoder = msgspec.json.Encoder()


class SavedCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One check of a saved guardrail."""

    id: str
    parameters: dict[str, Any] = {}


class SavedGuardrail(Entity, kw_only=True):
    """A stored guardrail record (treat as read-only: records are shared through per-worker caches)."""

    object: str = "guardrail"
    name: str
    checks: list[SavedCheck]
    deny: bool = False
    async_: bool = msgspec.field(default=False, name="async")
    on_fail: HookOutcome | None = None
    on_success: HookOutcome | None = None
    #: the checks' credentials as one sealed JSON list of ``[path, value]`` (None when they hold none); ``checks``
    #: shows them masked, except in a record ``opened`` for use
    sealed: str | None = None

    def public(self) -> dict[str, Any]:
        """The record as the API answers it: credentials masked, the sealed blob left out."""
        doc: dict[str, Any] = msgspec.to_builtins(self)
        del doc["sealed"]
        return doc


class GuardrailCreate(Params, frozen=True):
    """The body of ``POST /v1/guardrails``."""

    name: str
    checks: list[SavedCheck]
    deny: bool = False
    async_: bool = msgspec.field(default=False, name="async")
    on_fail: HookOutcome | None = None
    on_success: HookOutcome | None = None
    workspace_id: str | None = None


class GuardrailUpdate(Params, frozen=True):
    """The body of an update: every field optional; ``checks`` replaces the whole list."""

    name: str | None = None
    checks: list[SavedCheck] | None = None
    deny: bool | None = None
    async_: bool | None = msgspec.field(default=None, name="async")
    on_fail: HookOutcome | None = None
    on_success: HookOutcome | None = None


def _invalid(exc: ParamError) -> InvalidRequest:
    return InvalidRequest(f"invalid guardrail: {exc.param}: {exc.detail}", param=exc.param)


def json_body(raw: bytes | str, prefix: str) -> Any:
    """``raw`` decoded as JSON; what cannot be decoded is a 400 naming ``body``, its message starting ``prefix``
    (a saved guardrail's routes, and the direct checks of ``gateway.guardrails.direct``)."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        if is_not_utf8(exc):
            raise InvalidRequest(f"{prefix}: the body is not valid UTF-8", param="body") from None
        raise InvalidRequest(f"{prefix}: the body is not valid JSON ({exc})", param="body") from None
    except RecursionError:
        raise InvalidRequest(f"{prefix}: the body nests too deeply to decode", param="body") from None
    except UnicodeDecodeError:
        raise InvalidRequest(f"{prefix}: the body is not valid UTF-8", param="body") from None


def _decode(raw: bytes | str | dict[str, Any], shape: type[Params]) -> Any:
    doc = json_body(raw, "invalid guardrail") if isinstance(raw, (bytes, str)) else raw
    try:
        return decode_params(shape, doc, "", "field")
    except ParamError as exc:
        if not exc.param:
            raise InvalidRequest("invalid guardrail: the body must be a JSON object", param="body") from None
        raise _invalid(exc) from None


def parse_create(raw: bytes | str | dict[str, Any]) -> GuardrailCreate:
    """A create body, decoded and fully validated (400 naming the field)."""
    body = _decode(raw, GuardrailCreate)
    try:
        _validate(body.name, body.checks, body.deny, body.async_, body.on_fail, body.on_success)
        if body.workspace_id is not None and not body.workspace_id:
            raise ParamError("workspace_id", "must be a non-empty string")
    except ParamError as exc:
        raise _invalid(exc) from None
    return body


def parse_update(raw: bytes | str | dict[str, Any]) -> GuardrailUpdate:
    """An update body, decoded; its fields are validated against the record in ``updated_guardrail``."""
    return _decode(raw, GuardrailUpdate)


def new_guardrail(body: GuardrailCreate, workspace: str, organisation: str = DEFAULT_ORGANISATION,
                  guardrail_id: str = "", created_at: str = "") -> SavedGuardrail:
    """The record for a validated create body in ``workspace`` (the caller's; a body's ``workspace_id`` is for the
    caller to check). The repository fills an empty id and the timestamps when it stores the record."""
    return SavedGuardrail(
        id=guardrail_id, workspace_id=workspace, organisation_id=organisation, created_at=created_at,
        name=body.name, checks=body.checks, deny=body.deny, async_=body.async_, on_fail=body.on_fail,
        on_success=body.on_success,
    )


def updated_guardrail(record: SavedGuardrail, update: GuardrailUpdate) -> SavedGuardrail:
    """``record`` with the update's fields applied and validated together (400 naming the field)."""
    changes = {name: getattr(update, name) for name in update.__struct_fields__ if getattr(update, name) is not None}
    merged = msgspec.structs.replace(record, **changes)
    try:
        _validate(merged.name, merged.checks, merged.deny, merged.async_, merged.on_fail, merged.on_success)
    except ParamError as exc:
        raise _invalid(exc) from None
    return merged


def _validate(name: str, checks: list[SavedCheck], deny: bool, is_async: bool, on_fail: HookOutcome | None,
              on_success: HookOutcome | None) -> None:
    if not name.strip() or len(name) > NAME_MAX:
        raise ParamError("name", f"must be 1..{NAME_MAX} characters, not blank")
    if not checks:
        raise ParamError("checks", "must hold at least one check")
    if len(checks) > CHECKS_MAX:
        raise ParamError("checks", f"must hold at most {CHECKS_MAX} checks")
    for i, check in enumerate(checks):
        build_check(check.id, check.parameters, f"checks[{i}].parameters", f"checks[{i}].id")
    for label, outcome in (("on_fail", on_fail), ("on_success", on_success)):
        feedback = outcome.feedback if outcome is not None else None
        for field in ("value", "weight"):
            value = getattr(feedback, field) if feedback is not None else None
            if value is not None and type(value) not in (int, float):
                raise ParamError(f"{label}.feedback.{field}", "must be a number")
    denies = deny or any(o is not None and o.deny for o in (on_fail, on_success))
    if is_async and denies:
        raise ParamError("async", "an async guardrail cannot deny: it runs after the response has gone")


# --- credentials: sealed at rest, masked in answers (``gateway.controlplane.sealing``) -----------------------------


def _context(record: SavedGuardrail) -> str:
    return f"{KIND}/{record.workspace_id}/{record.id}"


def _doc(checks: list[SavedCheck]) -> dict[str, Any]:
    return {"checks": msgspec.to_builtins(checks)}


def _checks(doc: dict[str, Any]) -> list[SavedCheck]:
    return msgspec.convert(doc["checks"], list[SavedCheck])


def unmasked_checks(checks: list[SavedCheck], stored: Callable[[], dict[sealing.Path, Any]],
                    previous: list[SavedCheck] | None = None) -> list[SavedCheck]:
    """``checks`` with each masked credential replaced by the one ``stored()`` holds at the same place (400 naming
    the place, e.g. ``checks[0].parameters.headers.Authorization``, when none is, or when the update changes the
    ``url`` of the webhook check that credential goes to: a stored secret never follows a change of host, so
    ``previous``, the stored checks, tell where it went)."""
    doc = _doc(checks)
    before = None if previous is None else _doc(previous)
    moved = None if before is None else (lambda path: secret_hosts.moved_from(before, doc, path))
    if not sealing.restore_masked(doc, stored, lambda path: sealing.path_text("", path), moved):
        return checks
    return _checks(doc)


def sealed(box: SecretBox, record: SavedGuardrail) -> SavedGuardrail:
    """``record`` (its checks in clear, its id set) as stored: credentials masked in ``checks``, sealed apart."""
    doc = _doc(record.checks)
    blob = sealing.seal(box, _context(record), doc)
    if blob is None:
        return msgspec.structs.replace(record, sealed=None)
    return msgspec.structs.replace(record, checks=_checks(doc), sealed=blob)


def stored_secrets(box: SecretBox, record: SavedGuardrail) -> dict[sealing.Path, Any]:
    """The record's credentials by place, opened (SecretError when another secret key sealed them); a plain
    record's as they stand in its checks."""
    if record.sealed is None:
        return sealing.secrets_in(_doc(record.checks))
    return sealing.opened(box, _context(record), record.sealed)


def opened(box: SecretBox, record: SavedGuardrail) -> SavedGuardrail:
    """The record with its checks' credentials in clear, as requests run it (SecretError as ``stored_secrets``)."""
    if record.sealed is None:
        return record
    doc = _doc(record.checks)
    sealing.reveal(doc, stored_secrets(box, record))
    return msgspec.structs.replace(record, checks=_checks(doc))


async def sealed_record(repo: Repository[SavedGuardrail], box: SecretBox, record: SavedGuardrail) -> SavedGuardrail:
    """``record`` as stored now: one saved in clear by an older release is sealed and stored again (same
    ``last_updated_at``; best effort, see ``sealing.rewrite_sealed``)."""
    if record.sealed is not None or not sealing.secrets_in(_doc(record.checks)):
        return record
    done = sealed(box, record)
    await sealing.rewrite_sealed(repo, record, done)
    return done


# --- listing ----------------------------------------------------------------------------------------------------


class ListQuery(msgspec.Struct, frozen=True, gc=False):
    """A validated list query."""

    current_page: int = 0
    page_size: int = PAGE_SIZE_DEFAULT
    ids: frozenset[str] | None = None


class GuardrailPage(msgspec.Struct, frozen=True):
    """One page of a listing."""

    data: list[SavedGuardrail]
    total: int
    current_page: int
    page_size: int
    has_more: bool
    object: str = "list"


def parse_list_query(query: Mapping[str, str]) -> ListQuery:
    """``current_page``, ``page_size`` and ``ids`` from query parameters; a bad value is a 400 naming it."""
    values: dict[str, Any] = {}
    for name, low, high in (("current_page", 0, None), ("page_size", 1, PAGE_SIZE_MAX)):
        raw = query.get(name)
        if raw is None or raw == "":
            continue
        try:
            number = int(raw)
        except ValueError:
            number = None
        if number is None or number < low or (high is not None and number > high):
            bounds = f"{low}..{high}" if high is not None else f">= {low}"
            raise InvalidRequest(f"{name} must be an integer {bounds}, got {raw!r}", param=name)
        values[name] = number
    raw_ids = query.get("ids")
    if raw_ids is not None:
        ids = frozenset(part.strip() for part in raw_ids.split(",") if part.strip())
        if not ids:
            raise InvalidRequest("ids must name at least one guardrail id (comma-separated)", param="ids")
        values["ids"] = ids
    return ListQuery(**values)


def list_page(records: Iterable[SavedGuardrail], query: ListQuery, workspace: str | None = None) -> GuardrailPage:
    """The page of ``records`` (of ``workspace`` when given) that ``query`` asks for."""
    chosen = [
        r for r in records
        if (workspace is None or r.workspace_id == workspace) and (query.ids is None or r.id in query.ids)
    ]
    chosen.sort(key=lambda r: r.id, reverse=True)
    chosen.sort(key=lambda r: r.created_at, reverse=True)
    start = query.current_page * query.page_size
    data = chosen[start:start + query.page_size]
    return GuardrailPage(data, len(chosen), query.current_page, query.page_size, start + len(data) < len(chosen))


def encode_page(page: GuardrailPage) -> bytes:
    """The page as the API answers it (each record's credentials masked, ``SavedGuardrail.public``)."""
    doc: dict[str, Any] = msgspec.to_builtins(page)
    doc["data"] = [r.public() for r in page.data]
    return _encoder.encode(doc)
