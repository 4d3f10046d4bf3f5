"""Usage-limit and rate-limit policy records: their wire bodies, every validation rule, and the stored shapes.

Rules (each failure is a 400 whose ``param`` names the field): ``name`` up to 255 characters; ``conditions`` and
``group_by`` at least one item each, with keys ``api_key``, ``workspace_id``, ``provider``, ``model`` or
``metadata.<key>``; a condition ``value`` (and optional ``excludes``) is a non-empty string or a non-empty list of
them. Usage limits: ``type`` ``cost``, ``tokens`` or ``requests``; ``credit_limit`` >= 0 (USD for cost, a whole
number otherwise); ``alert_threshold`` >= 0 and below ``credit_limit``; ``periodic_reset`` ``weekly`` or
``monthly``, or ``periodic_reset_days`` 1..365, never both (neither: the limit is cumulative). Rate limits:
``type`` ``requests`` or ``tokens``; ``unit`` ``rpm``, ``rph`` or ``rpd``; ``value`` a whole number >= 0.
Bounds: counts (tokens, requests, a rate limit's ``value``, and ``alert_threshold``) at most ``MAX_COUNT``, cost at
most ``MAX_COST_USD``: every counter then stays below 2**53 (micro-dollars for cost), exact as a 64-bit integer in
SQLite and Redis and as a number in Redis's Lua, so no stored policy can overflow a counter.
``type`` and ``group_by`` are fixed once created (the counters are named by them); everything else is updatable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec

from gateway.controlplane.records import Entity, now_iso
from gateway.http.errors import InvalidRequest

#: the record kinds in the state store
USAGE_KIND = "policy_usage_limits"
RATE_KIND = "policy_rate_limits"
#: the ``object`` of every answer about a policy of either kind (create, read, list, update, archive), as the
#: spec's Policy records section says; the route tells the kinds apart
POLICY_OBJECT = "policy_usage_limits"

FIXED_KEYS = ("api_key", "workspace_id", "provider", "model")
METADATA_PREFIX = "metadata."
MAX_METADATA_KEY = 64
STATUSES = ("active", "archived")
USAGE_TYPES = ("cost", "tokens", "requests")
RATE_TYPES = ("requests", "tokens")
RATE_UNITS = ("rpm", "rph", "rpd")
#: the largest token or request count a policy may name (below 2**53: exact wherever a counter is kept)
MAX_COUNT = 10**15
#: the largest cost limit, in USD (MAX_COUNT micro-dollars)
MAX_COST_USD = 10**9

Unset = msgspec.UnsetType
T = TypeVar("T")
UNSET = msgspec.UNSET
Name = Annotated[str, msgspec.Meta(max_length=255)]
Values = str | list[str]
Count = Annotated[float, msgspec.Meta(ge=0, le=MAX_COUNT)]


class Condition(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Which requests a policy applies to: ``key``'s value is one of ``value`` (``*``: any) and none of
    ``excludes``."""

    key: str
    value: Values
    excludes: Values | None = None


class GroupBy(msgspec.Struct, forbid_unknown_fields=True):
    """A dimension the policy keeps a separate counter for."""

    key: str


Conditions = Annotated[list[Condition], msgspec.Meta(min_length=1)]
Groups = Annotated[list[GroupBy], msgspec.Meta(min_length=1)]


class UsageLimitBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/policies/usage-limits`` and of ``PUT`` on one (every field optional there)."""

    name: Name | Unset = UNSET
    conditions: Conditions | Unset = UNSET
    group_by: Groups | Unset = UNSET
    type: Literal["cost", "tokens", "requests"] | Unset = UNSET
    credit_limit: Count | Unset = UNSET
    alert_threshold: Count | None | Unset = UNSET
    periodic_reset: Literal["weekly", "monthly"] | None | Unset = UNSET
    periodic_reset_days: Annotated[int, msgspec.Meta(ge=1, le=365)] | None | Unset = UNSET
    status: Literal["active", "archived"] | Unset = UNSET
    workspace_id: str | None = None
    organisation_id: str | None = None


class RateLimitBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/policies/rate-limits`` and of ``PUT`` on one (every field optional there)."""

    name: Name | Unset = UNSET
    conditions: Conditions | Unset = UNSET
    group_by: Groups | Unset = UNSET
    type: Literal["requests", "tokens"] | Unset = UNSET
    unit: Literal["rpm", "rph", "rpd"] | Unset = UNSET
    value: Count | Unset = UNSET
    status: Literal["active", "archived"] | Unset = UNSET
    workspace_id: str | None = None
    organisation_id: str | None = None


class UsageLimitPolicy(Entity, kw_only=True):
    object: str = POLICY_OBJECT
    name: str = ""
    type: str
    status: str = "active"
    conditions: list[Condition]
    group_by: list[GroupBy]
    credit_limit: float
    alert_threshold: float | None = None
    periodic_reset: str | None = None
    periodic_reset_days: int | None = None
    #: when the reset period was last set (creation, or an update that changed it): periods count from there
    period_since: str = ""


class RateLimitPolicy(Entity, kw_only=True):
    object: str = POLICY_OBJECT
    name: str = ""
    type: str
    unit: str
    value: int
    status: str = "active"
    conditions: list[Condition]
    group_by: list[GroupBy]


#: a stored policy of either kind
Policy = UsageLimitPolicy | RateLimitPolicy


def _check_key(key: str, param: str) -> None:
    if key in FIXED_KEYS:
        return
    if key.startswith(METADATA_PREFIX) and 0 < len(key) - len(METADATA_PREFIX) <= MAX_METADATA_KEY:
        return
    raise InvalidRequest(
        f"{param} must be one of {', '.join(FIXED_KEYS)} or metadata.<key> (key up to {MAX_METADATA_KEY} "
        f"characters), got {key!r}", param=param)


def _check_values(values: Values, param: str) -> None:
    items = [values] if isinstance(values, str) else values
    if not items:
        raise InvalidRequest(f"{param} must be a non-empty string or a non-empty list of strings", param=param)
    for i, item in enumerate(items):
        if not item:
            at = param if isinstance(values, str) else f"{param}[{i}]"
            raise InvalidRequest(f"{at} must not be empty", param=at)


def check_conditions(conditions: list[Condition]) -> list[Condition]:
    for i, cond in enumerate(conditions):
        _check_key(cond.key, f"conditions[{i}].key")
        _check_values(cond.value, f"conditions[{i}].value")
        if cond.excludes is not None:
            _check_values(cond.excludes, f"conditions[{i}].excludes")
    return conditions


def check_group_by(groups: list[GroupBy]) -> list[GroupBy]:
    seen: set[str] = set()
    for i, group in enumerate(groups):
        _check_key(group.key, f"group_by[{i}].key")
        if group.key in seen:
            raise InvalidRequest(f"group_by[{i}].key repeats {group.key!r}", param=f"group_by[{i}].key")
        seen.add(group.key)
    return groups


def _whole(value: float, param: str) -> int:
    if value != int(value):
        raise InvalidRequest(f"{param} must be a whole number for this type, got {value}", param=param)
    return int(value)


def _required(body: Any, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(body, name) is UNSET:
            raise InvalidRequest(f"{name} is required", param=name)


def _fixed(body: Any, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(body, name) is not UNSET:
            raise InvalidRequest(f"{name} cannot be changed once a policy exists; create a new policy", param=name)


# -- usage limits ------------------------------------------------------------------------------------------------


def _check_usage(policy: UsageLimitPolicy) -> UsageLimitPolicy:
    """The rules that tie fields together (run on the record a create or an update would store)."""
    limit = policy.credit_limit
    if policy.type != "cost":
        limit = _whole(limit, "credit_limit")
    elif limit > MAX_COST_USD:
        raise InvalidRequest(f"credit_limit of a cost limit must be at most {MAX_COST_USD} (USD), got {limit}",
                             param="credit_limit")
    if policy.alert_threshold is not None and not policy.alert_threshold < limit:
        raise InvalidRequest(f"alert_threshold must be less than credit_limit ({policy.alert_threshold} >= "
                             f"{policy.credit_limit})", param="alert_threshold")
    if policy.periodic_reset is not None and policy.periodic_reset_days is not None:
        raise InvalidRequest("periodic_reset and periodic_reset_days are mutually exclusive: send one",
                             param="periodic_reset_days")
    return msgspec.structs.replace(policy, credit_limit=limit)


def _given(value: T | Unset) -> T:
    """A field ``_required`` has already checked is present."""
    assert value is not UNSET
    return value


def new_usage_limit(body: UsageLimitBody, workspace: str, organisation: str) -> UsageLimitPolicy:
    _required(body, ("conditions", "group_by", "type", "credit_limit"))
    policy = UsageLimitPolicy(
        workspace_id=workspace, organisation_id=organisation,
        name="" if body.name is UNSET else body.name,
        type=_given(body.type), status="active" if body.status is UNSET else body.status,
        conditions=check_conditions(_given(body.conditions)), group_by=check_group_by(_given(body.group_by)),
        credit_limit=_given(body.credit_limit),
        alert_threshold=None if body.alert_threshold is UNSET else body.alert_threshold,
        periodic_reset=None if body.periodic_reset is UNSET else body.periodic_reset,
        periodic_reset_days=None if body.periodic_reset_days is UNSET else body.periodic_reset_days,
        period_since=now_iso(),
    )
    return _check_usage(policy)


def updated_usage_limit(policy: UsageLimitPolicy, body: UsageLimitBody) -> UsageLimitPolicy:
    """The record after an update; setting one of periodic_reset / periodic_reset_days clears the other, and a
    changed period starts counting afresh."""
    _fixed(body, ("type", "group_by"))
    changes: dict[str, Any] = {}
    if body.name is not UNSET:
        changes["name"] = body.name
    if body.conditions is not UNSET:
        changes["conditions"] = check_conditions(body.conditions)
    if body.credit_limit is not UNSET:
        changes["credit_limit"] = body.credit_limit
    if body.alert_threshold is not UNSET:
        changes["alert_threshold"] = body.alert_threshold
    if body.status is not UNSET:
        changes["status"] = body.status
    reset, days = body.periodic_reset, body.periodic_reset_days
    if reset is not UNSET and days is not UNSET and reset is not None and days is not None:
        raise InvalidRequest("periodic_reset and periodic_reset_days are mutually exclusive: send one",
                             param="periodic_reset_days")
    if reset is not UNSET:
        changes["periodic_reset"] = reset
        if reset is not None:
            changes["periodic_reset_days"] = None
    if days is not UNSET:
        changes["periodic_reset_days"] = days
        if days is not None:
            changes["periodic_reset"] = None
    if not changes:
        raise InvalidRequest("nothing to update: send at least one updatable field", param=None)
    new = msgspec.structs.replace(policy, **changes)
    if (new.periodic_reset, new.periodic_reset_days) != (policy.periodic_reset, policy.periodic_reset_days):
        new = msgspec.structs.replace(new, period_since=now_iso())
    return _check_usage(new)


# -- rate limits -------------------------------------------------------------------------------------------------


def new_rate_limit(body: RateLimitBody, workspace: str, organisation: str) -> RateLimitPolicy:
    _required(body, ("conditions", "group_by", "type", "unit", "value"))
    return RateLimitPolicy(
        workspace_id=workspace, organisation_id=organisation,
        name="" if body.name is UNSET else body.name,
        type=_given(body.type), unit=_given(body.unit), value=_whole(_given(body.value), "value"),
        status="active" if body.status is UNSET else body.status,
        conditions=check_conditions(_given(body.conditions)), group_by=check_group_by(_given(body.group_by)),
    )


def updated_rate_limit(policy: RateLimitPolicy, body: RateLimitBody) -> RateLimitPolicy:
    _fixed(body, ("type", "group_by"))
    changes: dict[str, Any] = {}
    if body.name is not UNSET:
        changes["name"] = body.name
    if body.conditions is not UNSET:
        changes["conditions"] = check_conditions(body.conditions)
    if body.unit is not UNSET:
        changes["unit"] = body.unit
    if body.value is not UNSET:
        changes["value"] = _whole(body.value, "value")
    if body.status is not UNSET:
        changes["status"] = body.status
    if not changes:
        raise InvalidRequest("nothing to update: send at least one updatable field", param=None)
    return msgspec.structs.replace(policy, **changes)
