"""After the answer, off the response path: settle reservations to real usage, record alerts, note buckets.

A bounded queue per worker feeds a few background tasks. For each finished request holding a reservation, the
real amounts replace the reserved ones in one ``settle`` call (keyed by the gateway's request id, so a settle is
never applied twice): request counts stay; tokens are the answer's usage (prompt + completion); cost is their
price at the provider and model that answered. When the provider reported no usage, a request that got an answer
(or the start of a stream) keeps its reservation, and one that got none counts 0 tokens.
A hold settled in parts while its session runs (``parts.py``) settles its rest through the same queue.

Alerts: when a usage-limit counter with an ``alert_threshold`` reaches it, the first worker to notice (a
set-if-absent marker per policy, bucket and period) logs one warning and appends the alert to the policy's alert
log, which its GET shows. Buckets: the first time a worker sees a policy's bucket it appends its label to the
policy's bucket log, from which GET reports usage per bucket.

When the queue is full (the store far slower than the request rate) a settlement is dropped and counted in the
log; its reservation is released when it expires (``GATEWAY_POLICY_RESERVATION_TTL_MS``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

import msgspec

from gateway.background import BackgroundTask
from gateway.bounded_cache import BoundedCache
from gateway.observability.cost import Prices
from gateway.observability.entry import tokens
from gateway.observability.record import RequestRecord
from gateway.policies import periods
from gateway.policies.compiled import COST, REQUESTS, TOKENS, Bucket, CompiledPolicy, from_units
from gateway.state.base import BudgetItem, StateStore, StateStoreError
from gateway.waiting import within

log = logging.getLogger("gateway.policies")
_encode = msgspec.json.encode
QUEUE_MAX = 10_000
TASKS = 4
BUCKET_LOG_MAX = 10_000
ALERT_LOG_MAX = 100
_MAX_SEEN = 100_000


def buckets_log(policy_id: str) -> str:
    return f"policy-buckets:{policy_id}"


def alerts_log(policy_id: str) -> str:
    return f"policy-alerts:{policy_id}"


class Hold:
    """What one admitted request reserved: the store scope, reservation id (None for request counts only), the
    items in reserve order with the policy and bucket of each, and the estimate behind the amounts."""

    __slots__ = ("scope", "rid", "items", "policies", "buckets", "estimate")

    def __init__(self, scope: str, rid: str | None, items: list[BudgetItem], policies: list[CompiledPolicy],
                 buckets: list[Bucket], estimate: Any) -> None:
        self.scope = scope
        self.rid = rid
        self.items = items
        self.policies = policies
        self.buckets = buckets
        self.estimate = estimate


def actual_amounts(hold: Hold, record: RequestRecord, prices: Prices) -> list[int]:
    """The real amount of each reserved item, from the finished request's record (costs from ``prices``)."""
    usage = record.usage
    answered = record.status == 200 or record.ttft_s is not None
    tin = tout = total = 0
    if usage is not None:
        tin, tout, total = tokens(usage)
        total = total or tin + tout
    out: list[int] = []
    for item, policy in zip(hold.items, hold.policies):
        if policy.measure == REQUESTS:
            out.append(item.amount)
        elif usage is not None:
            out.append(total if policy.measure == TOKENS
                       else prices.cost_micros(record.provider, record.model, tin, tout))
        else:
            out.append(item.amount if answered else 0)
    return out


class Settler:
    """The background settlement queue of one worker."""

    def __init__(self, store: StateStore, prices: Prices, queue_max: int = QUEUE_MAX, tasks: int = TASKS) -> None:
        self.store = store
        self.prices = prices
        self.queue: asyncio.Queue[tuple[Callable[..., Awaitable[None]], tuple]] | None = None
        self.queue_max = queue_max
        self.task_count = tasks
        self._workers: list[BackgroundTask] = []
        #: (policy id, bucket id) pairs already noted by this worker
        self._seen: BoundedCache[tuple[str, str], None] = BoundedCache(_MAX_SEEN)
        self.dropped = 0

    def start(self) -> None:
        if self.queue is None:
            self.queue = asyncio.Queue(self.queue_max)
            self._workers = [BackgroundTask(f"gateway-policy-settle-{i}") for i in range(self.task_count)]
            for worker in self._workers:
                worker.start(self._run)

    async def close(self, drain_s: float = 5.0) -> None:
        """Finish the queued work (bounded by ``drain_s``), then stop."""
        if self.queue is not None:
            try:
                await within(self.queue.join(), drain_s)
            except TimeoutError:
                log.warning("policy settlement: %d items left unsettled at shutdown", self.queue.qsize())
        await asyncio.gather(*(worker.close() for worker in self._workers))
        self._workers = []
        self.queue = None

    def _put(self, job: Callable[..., Awaitable[None]], *args: Any) -> None:
        if self.queue is None:
            self.start()
        try:
            self.queue.put_nowait((job, args))  # type: ignore[union-attr]
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("policy settlement queue full: %d settlements dropped (their reservations expire)",
                            self.dropped)

    def submit(self, hold: Hold, record: RequestRecord) -> None:
        """Settle ``hold`` to what ``record`` (the finished request) used; returns at once."""
        self._put(self._settle, hold, record)

    def later(self, job: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run ``job(*args)`` off the request path, in this queue (a hold settled in parts settles its rest so,
        ``parts.py``); returns at once."""
        self._put(job, *args)

    def check_alerts_later(self, hold: Hold, watched: list[int]) -> None:
        """Check the alert thresholds of ``hold``'s items ``watched`` (indices) after a part was charged."""
        self._put(self._check_alerts, hold, watched)

    def note_buckets(self, policies: list[CompiledPolicy], buckets: list[Bucket]) -> None:
        """Remember (once per worker) that these buckets exist, so GET can report usage per bucket."""
        for policy, bucket in zip(policies, buckets):
            key = (policy.id, bucket.id)
            if key in self._seen:
                continue
            self._seen[key] = None
            self._put(self._note_bucket, policy.id, bucket)

    async def _run(self) -> None:
        queue = self.queue
        assert queue is not None
        while True:
            job, args = await queue.get()
            try:
                await job(*args)
            except StateStoreError:
                pass  # counted by the store; a lost settle is released when its reservation expires
            except Exception:  # one bad item must not stop settlement
                log.exception("policy settlement failed")
            finally:
                queue.task_done()

    async def _note_bucket(self, policy_id: str, bucket: Bucket) -> None:
        await self.store.log_append(buckets_log(policy_id), _encode([bucket.id, bucket.label]), BUCKET_LOG_MAX)

    async def _settle(self, hold: Hold, record: RequestRecord) -> None:
        if hold.rid is not None:
            await self.store.settle(hold.scope, hold.rid, hold.items, actual_amounts(hold, record, self.prices))
        watched = [i for i, p in enumerate(hold.policies) if p.alert is not None]
        if watched:
            await self._check_alerts(hold, watched)

    async def _check_alerts(self, hold: Hold, watched: list[int]) -> None:
        used = await self.store.usage(hold.scope, [hold.items[i].key for i in watched])
        for i, value in zip(watched, used):
            policy = hold.policies[i]
            if value < policy.alert:  # type: ignore[operator]
                continue
            item = hold.items[i]
            if not await self.store.set_if_absent(f"policy-alert:{item.key}", b"1", item.key_ttl_ms):
                continue  # already alerted this period
            now_ms = int(time.time() * 1000)
            period = policy.period(now_ms)
            alert = {
                "value_key": hold.buckets[i].label,
                "usage": from_units(policy.measure, value),
                "alert_threshold": from_units(policy.measure, policy.alert),  # type: ignore[arg-type]
                "credit_limit": from_units(policy.measure, policy.limit),
                "period_start": periods.iso(period.start_ms),
                "at": periods.iso(now_ms),
            }
            log.warning("usage limit policy %s crossed its alert threshold for %r: %s of %s %s used this period",
                        policy.title, alert["value_key"], alert["usage"], alert["credit_limit"],
                        {REQUESTS: "requests", TOKENS: "tokens", COST: "USD"}[policy.measure])
            await self.store.log_append(alerts_log(policy.id), _encode(alert), ALERT_LOG_MAX)
