"""Admission of requests against the active policies of their workspace: one atomic ``reserve`` per request.

Per worker, ``PolicyGate`` keeps every active policy compiled and grouped by workspace. The records watcher (and
every policy write of this worker) marks that cache stale; the next request that may be limited reloads it once
(concurrent requests share the load). A request of a workspace without policies costs one dictionary lookup and
no store call.

For a request whose workspace has policies, every policy whose conditions match names one counter: its bucket
(group_by values) in its current window or period. All of them are checked and incremented in ONE ``reserve``
call (atomic across the items, scope = the workspace). Amounts: 1 for a request count; for tokens the estimate
(prompt bytes / 4, rounded up, plus the output cap: ``max_completion_tokens`` or ``max_tokens`` times ``n`` /
``best_of``, else ``GATEWAY_POLICY_OUTPUT_TOKENS``; no output for embeddings, rerank and moderations); for cost
the price of that estimate in micro-dollars (the provider and model the request names; an unpriced model
costs 0). A rate-limit amount larger than the whole limit is cut to the limit, so a large request still fits an
empty window; a token or cost budget (usage limit) admits a request while it is not spent and reserves at most
what remains (``BudgetItem.cut``). Token and cost amounts are a reservation keyed by a gateway-made request id
(never the client's trace id) that ``finish`` settles to the real usage after the answer; request-count-only
admissions are final.

When the store cannot be reached: ``GATEWAY_STATE_FAIL_MODE=open`` admits without counting, ``closed`` answers
503 to requests a policy applies to (and, before the policies could ever be loaded, to every request).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from typing import Any, Awaitable, Callable

from gateway.controlplane.policies import RATE_KIND, USAGE_KIND, RateLimitPolicy, UsageLimitPolicy
from gateway.controlplane.records import Repository
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError, RateLimited, ServiceUnavailable, UsageLimitExceeded
from gateway.observability.cost import Prices
from gateway.observability.metrics import Metrics
from gateway.observability.record import RequestRecord
from gateway.policies import periods
from gateway.policies.compiled import COST, REQUESTS, TOKENS, CompiledPolicy, RequestFacts, from_units
from gateway.policies.parts import HoldParts
from gateway.policies.plans import WorkspacePolicies
from gateway.policies.settle import Hold, Settler
from gateway.routing.plan import Node
from gateway.settings import Settings
from gateway.state.base import Admission, BudgetItem, StateStore, StateStoreError

log = logging.getLogger("gateway.policies")
BYTES_PER_TOKEN = 4
#: on a spent budget's 429: tells SDKs that honour it (vendorA's) not to retry a request only a reset can admit
SHOULD_NOT_RETRY = (b"x-should-retry", b"false")
_RETRY_LOAD_S = 1.0


def first_provider(node: Node) -> str | None:
    """The provider of the target tried first: the first target, depth first, as the config lists them."""
    while node.children:
        node = node.children[0]
    return node.config.provider


class Estimate:
    """What a request is expected to use: its tokens (prompt, output) and their cost in micro-dollars."""

    __slots__ = ("prompt", "output", "tokens", "cost")

    def __init__(self, request: Any, body_len: int, provider: str | None, model: str | None, default_output: int,
                 prices: Prices) -> None:
        self.prompt = -(-body_len // BYTES_PER_TOKEN)
        output = 0
        if hasattr(request, "max_tokens"):  # chat and completions: the answer is text, capped by the request
            cap = getattr(request, "max_completion_tokens", None) or request.max_tokens
            choices = max(request.n or 1, getattr(request, "best_of", None) or 1)
            output = (default_output if cap is None else cap) * choices
        self.output = output
        self.tokens = self.prompt + output
        self.cost = prices.cost_micros(provider, model, self.prompt, output)


class PolicyGate:
    """The per-worker policy cache and the admission step of the pipeline."""

    #: the record kinds the cache holds (the records watcher reloads it when one of them changes)
    KINDS: tuple[str, ...] = (USAGE_KIND, RATE_KIND)

    def __init__(self, store: StateStore, settings: Settings, key_id: Callable[[str | None], str | None],
                 prices: Prices | None = None, metrics: Metrics | None = None) -> None:
        self.store = store
        #: where refusals are counted (a private one when none is given)
        self.metrics = metrics if metrics is not None else Metrics()
        #: the runtime's price table answers (a gate of its own when none is given)
        self.prices = prices if prices is not None else Prices()
        self.key_id = key_id
        self.usage_limits: Repository[UsageLimitPolicy] = Repository(
            store, USAGE_KIND, UsageLimitPolicy, "", "usage-limit policy", "policy_id")
        self.rate_limits: Repository[RateLimitPolicy] = Repository(
            store, RATE_KIND, RateLimitPolicy, "", "rate-limit policy", "policy_id")
        #: workspace -> its active policies and their admission plans
        self.by_workspace: dict[str, WorkspacePolicies] = {}
        self.stale = True
        self.loaded = False
        self._generation = 0
        #: ids of stored policies that could not be compiled (logged once each)
        self._unusable: set[str] = set()
        self._loading: asyncio.Future | None = None
        self._next_try = 0.0
        self.fail_closed = settings.state_fail_mode == "closed"
        self.output_tokens = settings.policy_output_tokens
        self.reservation_ttl_ms = settings.policy_reservation_ttl_ms
        self.settler = Settler(store, self.prices)
        self._rid_prefix = os.urandom(6).hex()
        self._rid_counter = itertools.count(1)
        self._open_logged_at = -1e9
        self._open_count = 0

    # -- the cache -------------------------------------------------------------------------------------------

    def invalidate(self) -> None:
        """Some record changed (watcher) or this worker wrote a policy: reload now, in the background. Until the
        load ends, requests that may be limited wait for it (they never use a set known to be outdated)."""
        self.stale = True
        self._generation += 1
        self._next_try = 0.0
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a runtime not started yet): the next request loads
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())

    def may_apply(self, workspace: str | None) -> bool:
        """False when no policy can apply to this workspace's requests (a dictionary lookup; the hot path)."""
        return self.stale or workspace in self.by_workspace

    async def refresh(self) -> None:
        """Load the active policies when stale (one load shared by concurrent callers). A failed load keeps the
        previous policies, which are used until a load succeeds (retried at most once a second)."""
        for _ in range(3):  # records changing during a load start another: follow a few, then go on
            if not self.stale or time.monotonic() < self._next_try:
                return
            loading = self._loading
            if loading is None:
                loading = self._loading = asyncio.ensure_future(self._load())
            await asyncio.shield(loading)

    async def _load(self) -> None:
        generation = self._generation
        try:
            usage, rate = await asyncio.gather(self.usage_limits.list(None), self.rate_limits.list(None))
        except GatewayError:  # the store is unreachable: keep what we have, try again later
            self._next_try = time.monotonic() + _RETRY_LOAD_S
            return
        except Exception:  # stored records this code cannot read must not fail every request
            log.exception("policies: the stored policies could not be read; keeping the set loaded before")
            self._next_try = time.monotonic() + _RETRY_LOAD_S
            return
        finally:
            self._loading = None
        grouped: dict[str, list[CompiledPolicy]] = {}
        records: list[UsageLimitPolicy | RateLimitPolicy] = [*rate, *usage]
        for record in records:
            if record.status == "active":
                try:
                    compiled = CompiledPolicy(record)
                except Exception:  # one unusable record must not fail every request
                    if record.id not in self._unusable:
                        self._unusable.add(record.id)
                        log.exception("policy %s (workspace %s) cannot be compiled and is not enforced",
                                      record.id, record.workspace_id)
                    continue
                grouped.setdefault(record.workspace_id, []).append(compiled)
        self.by_workspace = {ws: WorkspacePolicies(items) for ws, items in grouped.items()}
        self.loaded = True
        if generation == self._generation:
            self.stale = False
        else:  # records changed while loading: load again
            self._loading = asyncio.ensure_future(self._load())

    # -- admission -------------------------------------------------------------------------------------------

    def admit(self, ctx: RequestContext, request: Any, body_len: int, node: Node) -> Awaitable[Hold | None]:
        """Check and count the request against every matching policy (429 when one is exhausted). The Hold, when
        one is returned, must be handed to ``finish`` after the answer. (``admit_as``'s awaitable, handed back
        without a coroutine of its own: the pipeline pays no extra frame.)"""
        return self.admit_as(ctx, request, body_len, first_provider(node), getattr(request, "model", None))

    async def admit_as(self, ctx: RequestContext, request: Any, body_len: int, provider: str | None,
                       model: str | None) -> Hold | None:
        """``admit`` for a request whose provider and model are named by the caller (an MCP tool call: ``provider``
        ``mcp:<server>``, ``model`` the tool; it sends ``body_len`` 0 and no request, so it reserves nothing of a
        token or cost budget)."""
        if self.stale:
            await self.refresh()
        workspace = ctx.workspace or ""
        policies = self.by_workspace.get(workspace)
        if policies is None:
            if not self.loaded and self.fail_closed:
                self.metrics.count_policy_rejection("state_store")
                raise ServiceUnavailable("the state store is unreachable and limits fail closed; try again shortly")
            return None
        facts = RequestFacts(workspace, provider, model, ctx.metadata,
                             lambda: self.key_id(ctx.api_key))
        now_ms = int(time.time() * 1000)
        plan, new = policies.plan(facts, now_ms)
        matched = plan.policies
        if not matched:
            return None
        if new:
            self.settler.note_buckets(matched, plan.buckets)
        items = plan.items
        rid = estimate = None
        if items is None:
            estimate = Estimate(request, body_len, provider, model, self.output_tokens, self.prices)
            items = [BudgetItem(key, p.limit, amount_of(p, estimate), ttl, p.budget)
                     for p, key, ttl in zip(matched, plan.keys, plan.ttls)]
            rid = self._new_rid()
        try:
            admission = await self.store.reserve(workspace, items, rid, self.reservation_ttl_ms if rid else None)
        except StateStoreError as exc:
            if self.fail_closed:
                self.metrics.count_policy_rejection("state_store")
                raise ServiceUnavailable(
                    "the state store is unreachable and limits fail closed; try again shortly") from None
            self._failed_open(exc)
            return None
        if not admission.admitted:
            policy = matched[admission.index]
            self.metrics.count_policy_rejection(policy.kind, policy.id)
            raise refusal(policy, admission, items[admission.index].amount, plan.ends[admission.index], now_ms)
        if admission.amounts:  # a budget's reservation was cut to what remained: that is what settles
            items = [BudgetItem(i.key, i.limit, a, i.key_ttl_ms, i.cut) for i, a in zip(items, admission.amounts)]
        if rid is None and all(p.alert is None for p in matched):
            return None
        return Hold(workspace, rid, items, matched, plan.buckets, estimate)

    def _failed_open(self, exc: StateStoreError) -> None:
        now = time.monotonic()
        self._open_count += 1
        if now >= self._open_logged_at + 10.0:
            log.warning("limits failed open for %d request(s): the state store did not answer (%s)",
                        self._open_count, exc)
            self._open_logged_at = now
            self._open_count = 0

    def _new_rid(self) -> str:
        return f"pr-{self._rid_prefix}-{next(self._rid_counter)}"

    def parts(self, hold: Hold | None, provider: str | None, model: str | None) -> HoldParts | None:
        """``hold`` settled in parts while its session runs (``parts.py``; a WebSocket session's, never a chat
        request's): None when it reserved no tokens and no cost. Its ``finish`` then replaces this gate's."""
        return HoldParts.of(self.settler, hold, provider, model)

    def finish(self, hold: Hold, record: RequestRecord) -> None:
        """After the answer: settle the reservation to the real usage and check alerts, off the response path."""
        self.settler.submit(hold, record)

    async def start(self) -> None:
        await self.refresh()
        self.settler.start()

    async def close(self) -> None:
        loading = self._loading
        if loading is not None:
            loading.cancel()
        await self.settler.close()


def amount_of(policy: CompiledPolicy, estimate: Estimate) -> int:
    """What the request reserves on this policy's counter. A rate-limit amount larger than the whole limit is cut
    to the limit, so a large request still fits an empty window."""
    if policy.measure == REQUESTS:
        return 1
    amount = estimate.tokens if policy.measure == TOKENS else estimate.cost
    if policy.rate and 0 < policy.limit < amount:
        return policy.limit
    return amount


def refusal(policy: CompiledPolicy, admission: Admission, estimate: int, end_ms: int | None,
            now_ms: int) -> GatewayError:
    """The 429 naming the policy, with ``Retry-After`` when its window or period ends; a usage limit's says what is
    used, what the request's estimate is (``estimate``, in the counter's units) and what remains, and carries
    ``x-should-retry: false`` (a rate limit's does not: its window admits again soon)."""
    headers = None
    if end_ms is not None:
        headers = [(b"retry-after", str(periods.seconds_until(end_ms, now_ms)).encode())]
    if policy.rate:
        what = {REQUESTS: "requests", TOKENS: "tokens"}[policy.measure]
        word = periods.UNIT_WORD[policy.unit]  # type: ignore[index]
        message = (f"rate limit policy {policy.title} exceeded: at most {policy.limit} {what} per {word}; the "
                   f"window admits requests again in {periods.seconds_until(end_ms or now_ms, now_ms)}s")
        return RateLimited(message, headers=headers)
    measure = policy.measure
    unit = {REQUESTS: "requests", TOKENS: "tokens", COST: "USD"}[measure]
    used = from_units(measure, admission.used)
    limit = from_units(measure, admission.limit)
    left = from_units(measure, max(0, admission.limit - admission.used))
    asked = f"this request's estimate is {from_units(measure, estimate)} {unit}"
    if measure == REQUESTS:
        asked = "this request counts 1"
    when = f"until the period resets at {periods.iso(end_ms)}" if end_ms is not None else "(the limit is cumulative)"
    message = (f"usage limit policy {policy.title} exceeded: {used} of {limit} {unit} used, {left} remaining, and "
               f"{asked}; requests are refused {when}")
    # nothing changes before the period resets: the vendorA SDKs read this header and do not retry
    return UsageLimitExceeded(message, headers=[*(headers or ()), SHOULD_NOT_RETRY])
