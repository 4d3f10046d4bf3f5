"""A session's token and cost budgets checked after each response: a session whose usage spends a usage-limit
policy's budget ends there, with an ``error`` event and close code 1008, instead of running on until it closes.

The accounting stays the session's one policy hold (taken when it opened, settled to the summed usage when it
ends: rate limits, budgets and alerts as for any request). After each ``response.done`` that reports usage, this
reads the budget counters the hold named (one ``usage`` call on the state store) and adds what the session has
used so far (less the one token's worth its hold already counts): at or past a budget's limit, the session is over.
A store that cannot answer leaves the session running (the settlement at its end still counts it). A budget whose
period rolls over during a session is checked against the period the session opened in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from gateway.observability.cost import Prices
from gateway.policies.compiled import COST, TOKENS, from_units
from gateway.realtime.usage import SessionUsage
from gateway.state.base import StateStore, StateStoreError

CLOSE_CODE = 1008
CLOSE_REASON = "usage limit exceeded"


class BudgetWatch:
    """The usage-limit budgets (tokens, cost) of one session's policy ``hold``."""

    __slots__ = ("store", "prices", "provider", "model", "scope", "checks", "error_event")

    def __init__(self, store: StateStore, prices: Prices, hold: Any, provider: str, model: str,
                 event: Callable[[str], str] | None = None) -> None:
        self.store = store
        #: the dialect's error event the session's last message carries (the Realtime API's by default)
        self.error_event = event or error_event
        self.prices = prices
        self.provider = provider
        self.model = model
        self.scope: str = hold.scope
        #: (counter key, limit, what the hold counts on it, policy) of every budget
        self.checks = [(item.key, item.limit, item.amount, policy) for item, policy in zip(hold.items, hold.policies)
                       if policy.budget and policy.measure in (TOKENS, COST)]

    @classmethod
    def of(cls, store: StateStore, prices: Prices, hold: Any, provider: str, model: str,
           event: Callable[[str], str] | None = None) -> BudgetWatch | None:
        """The watch of ``hold`` (None when it names no budget)."""
        if hold is None:
            return None
        watch = cls(store, prices, hold, provider, model, event)
        return watch if watch.checks else None

    async def spent(self, usage: SessionUsage) -> str | None:
        """Why the session must end (a budget is spent with its usage so far), or None."""
        try:
            used = await self.store.usage(self.scope, [key for key, _, _, _ in self.checks])
        except StateStoreError:
            return None
        for (_, limit, held, policy), counted in zip(self.checks, used):
            mine = usage.total if policy.measure == TOKENS else self.prices.cost_micros(
                self.provider, self.model, usage.input, usage.output)
            total = counted - held + mine
            if total >= limit:
                unit = "tokens" if policy.measure == TOKENS else "USD"
                return (f"usage limit policy {policy.title} exceeded: {from_units(policy.measure, total)} of "
                        f"{from_units(policy.measure, limit)} {unit} used with this session's responses; the session "
                        "ends")
        return None


def error_event(message: str) -> str:
    """The Realtime API's ``error`` server event the session's last message carries."""
    return msgspec.json.encode({"type": "error", "event_id": "event_gateway_usage_limit", "error": {
        "type": "usage_limit_exceeded", "code": "usage_limit_exceeded", "message": message, "param": None,
        "event_id": None}}).decode()


def responses_error_event(message: str) -> str:
    """The Responses WebSocket mode's ``error`` event (its ``status`` and nested ``error``, as the mode sends its
    refusals) that a session's last message carries."""
    return msgspec.json.encode({"type": "error", "status": 429, "error": {
        "type": "usage_limit_exceeded", "code": "usage_limit_exceeded", "message": message, "param": None}}).decode()
