"""A policy as the admin API shows it: the record plus its current usage, reset times and alerts.

Usage is read from the counters of the current window (rate limits) or period (usage limits), one per bucket the
gateway has seen for the policy: ``value_key_usage_map`` maps each bucket's value (the group_by value, or the JSON
array of values for several group_by keys) to its usage, and ``current_usage`` is their sum. Cost is shown in USD,
tokens and requests as counts. Usage limits add ``last_reset_at`` (null until the first reset), and
``next_usage_reset_at`` (UTC midnight; null for a cumulative limit) and ``alerts`` (newest last).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from gateway.controlplane.policies import POLICY_OBJECT, RateLimitPolicy, UsageLimitPolicy
from gateway.policies import periods
from gateway.policies.compiled import CompiledPolicy, from_units
from gateway.policies.settle import ALERT_LOG_MAX, BUCKET_LOG_MAX, alerts_log, buckets_log
from gateway.state.base import StateStore

_decode = msgspec.json.decode


async def _buckets(store: StateStore, policy_id: str) -> dict[str, str]:
    """bucket id -> label of every bucket noted for the policy."""
    found: dict[str, str] = {}
    for _, raw in await store.log_read(buckets_log(policy_id), 0, BUCKET_LOG_MAX):
        bucket_id, label = _decode(raw)
        found[bucket_id] = label
    return found


async def policy_view(store: StateStore, record: UsageLimitPolicy | RateLimitPolicy,
                      with_usage: bool = True) -> dict[str, Any]:
    """The record as a JSON-ready dict, with usage (read from the store) when ``with_usage``."""
    doc = msgspec.to_builtins(record)
    doc.pop("period_since", None)
    doc["object"] = POLICY_OBJECT  # rate-limit records stored before it was one object say policy_rate_limits
    if not with_usage:
        return doc
    policy = CompiledPolicy(record)
    now_ms = int(time.time() * 1000)
    buckets = await _buckets(store, record.id)
    keys = [policy.counter(bucket_id, now_ms)[0] for bucket_id in buckets]
    values = await store.usage(record.workspace_id, keys) if keys else []
    usage_map = {label: from_units(policy.measure, v) for label, v in zip(buckets.values(), values)}
    doc["current_usage"] = from_units(policy.measure, sum(values))
    doc["value_key_usage_map"] = usage_map
    if isinstance(record, RateLimitPolicy):
        tag, end = periods.window(record.unit, now_ms)
        doc["window_reset_at"] = periods.iso(end)
        return doc
    current = policy.period(now_ms)
    doc["last_reset_at"] = periods.iso(periods.last_reset_ms(current, policy.since_ms))
    doc["next_usage_reset_at"] = periods.iso(current.end_ms)
    doc["alerts"] = [_decode(raw) for _, raw in await store.log_read(alerts_log(record.id), 0, ALERT_LOG_MAX)]
    return doc


def created(record: UsageLimitPolicy | RateLimitPolicy) -> dict[str, str]:
    """The answer of a create: ``{id, object}`` (``object`` is ``policy_usage_limits`` for both kinds)."""
    return {"id": record.id, "object": POLICY_OBJECT}


def archived(record: UsageLimitPolicy | RateLimitPolicy) -> dict[str, Any]:
    """The answer of an archive (``DELETE``): the shape of every control-plane delete."""
    return {"id": record.id, "object": POLICY_OBJECT, "deleted": True}
