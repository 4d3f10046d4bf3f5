"""A session's hold settled response by response, and its token and cost budgets checked after each: a session whose
usage spends a usage-limit policy's budget ends there, with an ``error`` event and close code 1008, instead of running
on until it closes.

The accounting is the session's one policy hold (taken when it opened: its request counts, and one token's worth
reserved), settled in parts (``gateway/policies/parts.py``): after each event that ends a response with usage (the
Realtime API's ``response.done``, the Responses mode's ``response.completed`` / ``response.incomplete``), that
response's tokens and cost are charged to the hold's token and cost counters (one ``settle`` call on the state
store), so budgets, other requests and ``GET /v1/policies/...`` see them at once; then the budgets are read as they
now stand (one ``usage`` call; a part the store did not take counts as well): at or past a budget's limit, the session
is over. The session's end settles the rest (its one reserved token returned; nothing counted twice). A store that
cannot answer leaves the session running, and the part it did not take is charged later (before the next part, or
at the end). Budgets are counted and checked in the window or period the session opened in.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gateway.policies.compiled import COST, TOKENS, from_units
from gateway.policies.parts import HoldParts
from gateway.realtime.usage import SessionUsage
from gateway.state.base import StateStore, StateStoreError

CLOSE_CODE = 1008
CLOSE_REASON = "usage limit exceeded"


class BudgetWatch:
    """The session's hold settled in ``parts``, and its usage-limit budgets (tokens, cost)."""

    __slots__ = ("store", "parts", "scope", "checks", "error_event")

    def __init__(self, store: StateStore, parts: HoldParts, event: Callable[[str], str] | None = None) -> None:
        self.store = store
        self.parts = parts
        #: the dialect's error event the session's last message carries (the Realtime API's by default)
        self.error_event = event or error_event
        hold = parts.hold
        self.scope: str = hold.scope
        #: (index in the hold, counter key, limit, policy) of every budget
        self.checks = [(index, item.key, item.limit, policy)
                       for index, (item, policy) in enumerate(zip(hold.items, hold.policies))
                       if policy.budget and policy.measure in (TOKENS, COST)]

    @classmethod
    def of(cls, store: StateStore, parts: HoldParts | None,
           event: Callable[[str], str] | None = None) -> BudgetWatch | None:
        """The watch of a hold settled in ``parts`` (None when there are none: no token or cost counter)."""
        return None if parts is None else cls(store, parts, event)

    async def spent(self, usage: SessionUsage) -> str | None:
        """Charge what the session used since the last response, then say why the session must end (a budget is
        spent), or None."""
        parts = self.parts
        await parts.settle(usage.input, usage.output, usage.total, usage.model)
        checks = self.checks
        if not checks:
            return None
        try:
            used = await self.store.usage(self.scope, [key for _, key, _, _ in checks])
        except StateStoreError:
            return None
        for (index, _, limit, policy), counted in zip(checks, used):
            total = counted + parts.unsettled(index)
            if total >= limit:
                unit = "tokens" if policy.measure == TOKENS else "USD"
                return (f"usage limit policy {policy.title} exceeded: {from_units(policy.measure, total)} of "
                        f"{from_units(policy.measure, limit)} {unit} used, this session's responses included; the "
                        "session ends")
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
