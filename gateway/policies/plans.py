"""A workspace's active policies with their admission plans, cached per distinct request signature.

A request's signature is the tuple of the values it has for every key the workspace's policies read (conditions
and group_by). Requests with one signature match the same policies and fall in the same buckets, so the plan
(which policies, which buckets, which counters) is worked out once and reused until the first of its windows or
periods ends; for request counts even the budget items are reused. A request then costs the signature (one
value per key) and one dictionary lookup before its ``reserve``.
"""

from __future__ import annotations

from gateway.bounded_cache import BoundedCache
from gateway.policies.compiled import REQUESTS, Bucket, CompiledPolicy, RequestFacts
from gateway.state.base import BudgetItem

MAX_PLANS = 4096
_NEVER = 2**62


class Plan:
    """What requests of one signature do: the matched ``policies`` (in order) with their ``buckets``, counter
    ``keys`` and lifetimes, window or period ``ends``; ``items`` prebuilt when every one counts requests (None
    when an estimate is needed); valid until ``until`` (epoch ms)."""

    __slots__ = ("policies", "buckets", "keys", "ttls", "ends", "until", "items")

    def __init__(self, policies: tuple[CompiledPolicy, ...], facts: RequestFacts, now_ms: int) -> None:
        matched: list[CompiledPolicy] = []
        buckets: list[Bucket] = []
        keys: list[str] = []
        ttls: list[int] = []
        ends: list[int | None] = []
        for policy in policies:
            if policy.matches(facts):
                bucket = policy.bucket(facts)
                key, ttl, end = policy.counter(bucket.id, now_ms)
                matched.append(policy)
                buckets.append(bucket)
                keys.append(key)
                ttls.append(ttl)
                ends.append(end)
        self.policies = matched
        self.buckets = buckets
        self.keys = keys
        self.ttls = ttls
        self.ends = ends
        self.until = min((e for e in ends if e is not None), default=_NEVER)
        self.items: list[BudgetItem] | None = None
        if all(p.measure == REQUESTS for p in matched):
            self.items = [BudgetItem(k, p.limit, 1, t) for p, k, t in zip(matched, keys, ttls)]


class WorkspacePolicies:
    """The active policies of one workspace (rate limits first, then usage limits, each oldest first)."""

    __slots__ = ("policies", "fact_keys", "plans")

    def __init__(self, policies: list[CompiledPolicy]) -> None:
        self.policies = tuple(policies)
        keys: list[str] = []
        for policy in policies:
            for key in (*(c.key for c in policy.conditions), *policy.group_keys):
                if key not in keys:
                    keys.append(key)
        self.fact_keys = tuple(keys)
        self.plans: BoundedCache[tuple, Plan] = BoundedCache(MAX_PLANS)

    def plan(self, facts: RequestFacts, now_ms: int) -> tuple[Plan, bool]:
        """The plan for this request, and whether it was made just now (its buckets may be new to this worker)."""
        signature = tuple([facts.value(k) for k in self.fact_keys])
        plan = self.plans.get(signature)
        if plan is not None and now_ms < plan.until:
            return plan, False
        plan = Plan(self.policies, facts, now_ms)
        self.plans[signature] = plan
        return plan, True
