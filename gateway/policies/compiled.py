"""Policies compiled for the request path: condition matching, group_by buckets and the counters they name.

Condition and group_by keys read these facts of a request:

- ``api_key``: the id of the gateway key that sent it (never the secret);
- ``workspace_id``: the key's workspace;
- ``provider``: the provider of the target tried first: the config's first target, depth first, as written (for
  a single provider, that provider; for fallback, the first fallback; for loadbalance and conditional, the first
  listed target, because the check runs before routing picks one);
- ``model``: the ``model`` of the request body;
- ``metadata.<key>``: that key of ``x-gateway-metadata`` (``_user`` included); a non-string value is read as its
  JSON text.

A condition matches when the request has a value for its key, the value is one of ``value`` (``*`` matches any
value; a value ending in ``*`` matches by prefix, e.g. ``gpt-4o*``) and none of ``excludes``. All conditions of a
policy must match. A group_by key the request has no value for counts in the bucket of the empty value.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import msgspec

from gateway.controlplane.policies import MAX_COUNT, Condition, RateLimitPolicy, UsageLimitPolicy
from gateway.observability.cost import MICROS_PER_USD
from gateway.policies import periods

_encode = msgspec.json.encode
REQUESTS, TOKENS, COST = 0, 1, 2
MEASURES = {"requests": REQUESTS, "tokens": TOKENS, "cost": COST}


class RequestFacts:
    """The values condition and group_by keys read from one request, each worked out on first use."""

    __slots__ = ("workspace", "provider", "model", "metadata", "_api_key", "_key_id")

    def __init__(self, workspace: str, provider: str | None, model: str | None, metadata: dict[str, Any],
                 key_id: Callable[[], str | None]) -> None:
        self.workspace = workspace
        self.provider = provider
        self.model = model
        self.metadata = metadata
        self._key_id = key_id
        self._api_key: str | None | bool = False

    def value(self, key: str) -> str | None:
        if key == "workspace_id":
            return self.workspace
        if key == "model":
            return self.model or None
        if key == "provider":
            return self.provider or None
        if key == "api_key":
            if self._api_key is False:
                self._api_key = self._key_id()
            return self._api_key  # type: ignore[return-value]
        raw = self.metadata.get(key[9:]) if self.metadata else None  # "metadata.<key>"
        if raw is None:
            return None
        return raw if isinstance(raw, str) else _encode(raw).decode()


def _values(values: str | list[str] | None) -> tuple[bool, frozenset[str], tuple[str, ...]]:
    """(matches any, exact values, prefixes) of a condition's ``value`` or ``excludes``."""
    if values is None:
        return False, frozenset(), ()
    items = [values] if isinstance(values, str) else values
    if "*" in items:
        return True, frozenset(), ()
    exact = frozenset(v for v in items if not v.endswith("*"))
    prefixes = tuple(v[:-1] for v in items if v.endswith("*"))
    return False, exact, prefixes


class _Condition:
    __slots__ = ("key", "any", "exact", "prefixes", "none", "excluded", "excluded_prefixes")

    def __init__(self, cond: Condition) -> None:
        self.key = cond.key
        self.any, self.exact, self.prefixes = _values(cond.value)
        self.none, self.excluded, self.excluded_prefixes = _values(cond.excludes)

    def matches(self, value: str | None) -> bool:
        if value is None or self.none:
            return False
        if not self.any and value not in self.exact and not (self.prefixes and value.startswith(self.prefixes)):
            return False
        if value in self.excluded or (self.excluded_prefixes and value.startswith(self.excluded_prefixes)):
            return False
        return True


class Bucket:
    """One group_by value combination: ``id`` goes into counter names, ``label`` is shown to users (the value
    itself for one group_by key, the JSON array of values for several)."""

    __slots__ = ("id", "label")

    def __init__(self, id: str, label: str) -> None:
        self.id = id
        self.label = label


class CompiledPolicy:
    """An active policy as the request path uses it. ``limit`` and ``alert`` are in the counter's unit
    (requests, tokens or micro-dollars). ``budget``: a token or cost usage limit, which admits a request while it
    is not spent and reserves at most what remains."""

    __slots__ = ("id", "name", "workspace", "rate", "measure", "limit", "alert", "unit", "reset", "days",
                 "since_ms", "conditions", "group_keys", "record", "budget")

    def __init__(self, record: UsageLimitPolicy | RateLimitPolicy) -> None:
        self.record = record
        self.id = record.id
        self.name = record.name
        self.workspace = record.workspace_id
        self.conditions = tuple(_Condition(c) for c in record.conditions)
        self.group_keys = tuple(g.key for g in record.group_by)
        self.alert: int | None = None
        self.unit = self.reset = None
        self.days: int | None = None
        self.since_ms = 0
        if isinstance(record, RateLimitPolicy):
            self.rate = True
            self.measure = MEASURES[record.type]
            self.limit = in_units(REQUESTS, record.value)
            self.unit = record.unit
        else:
            self.rate = False
            self.measure = MEASURES[record.type]
            self.limit = in_units(self.measure, record.credit_limit)
            if record.alert_threshold is not None:
                self.alert = in_units(self.measure, record.alert_threshold)
            self.reset = record.periodic_reset
            self.days = record.periodic_reset_days
            self.since_ms = periods.parse_iso_ms(record.period_since or record.created_at)
        self.budget = not self.rate and self.measure != REQUESTS

    @property
    def kind(self) -> str:
        return "rate_limit" if self.rate else "usage_limit"

    @property
    def title(self) -> str:
        """How messages and logs name the policy."""
        return f"'{self.name}' ({self.id})" if self.name else f"{self.id}"

    def matches(self, facts: RequestFacts) -> bool:
        for cond in self.conditions:
            if not cond.matches(facts.value(cond.key)):
                return False
        return True

    def bucket(self, facts: RequestFacts) -> Bucket:
        return bucket_of([facts.value(k) or "" for k in self.group_keys])

    def counter(self, bucket_id: str, now_ms: int) -> tuple[str, int, int | None]:
        """(counter key, its lifetime if created now, end of the window or period in epoch ms or None)."""
        if self.rate:
            tag, end = periods.window(self.unit, now_ms)  # type: ignore[arg-type]
            return f"r:{self.id}:{tag}:{bucket_id}", end - now_ms + periods.KEY_MARGIN_MS, end
        current = self.period(now_ms)
        return f"u:{self.id}:{current.tag}:{bucket_id}", current.ttl_ms(now_ms), current.end_ms

    def period(self, now_ms: int) -> periods.Period:
        return periods.period(self.reset, self.days, self.since_ms, now_ms)


def bucket_of(values: Sequence[str]) -> Bucket:
    """The bucket of these group_by values (in group_by order)."""
    text = _encode(list(values))
    label = values[0] if len(values) == 1 else text.decode()
    return Bucket(hashlib.blake2b(text, digest_size=8).hexdigest(), label)


def in_units(measure: int, amount: float) -> int:
    """A limit as the counter counts it: micro-dollars for cost (rounded), whole requests or tokens otherwise.

    Never above ``MAX_COUNT`` (a record stored before the API bounded limits counts as that), never below 0."""
    units = amount * MICROS_PER_USD if measure == COST else amount
    if not units < MAX_COUNT:  # NaN and infinities included
        return MAX_COUNT
    return max(0, int(round(units)) if measure == COST else int(units))


def from_units(measure: int, amount: int) -> float | int:
    """A counter's value as the API shows it: USD for cost, whole requests or tokens otherwise."""
    return amount / MICROS_PER_USD if measure == COST else amount
