"""A live hold settled in parts: a long request (a WebSocket session) charges each response's usage to its token and
cost counters when the response ends, instead of all of it when the request ends.

A request's hold (``settle.Hold``) is settled once, after the answer (``Settler.submit``). A session holds its one
hold for as long as it is open; ``HoldParts`` lets it settle that hold piece by piece. Chat never makes one: it is
built by ``PolicyGate.parts`` for a hold that reserved tokens or cost, and nothing on the request path calls it.

- Each part is what the session used since the part before (the caller hands over its usage so far: input, output
  and total tokens). Its amounts are the hold's token items' share (total tokens) and cost items' share (the price
  of its input and output tokens at the session's provider and model, as ``gateway/observability/cost.py`` prices
  any request: audio and cached tokens are inside the input and output counts the provider reports, at the model's
  input and output prices). Request counts are never part of a part.
- A part is charged with the store's ``settle`` under an id of its own (``<hold id>.<n>``) that no ``reserve``
  made: the store charges the amounts to the hold's counters that still exist (its ``late`` outcome) exactly once
  per id, atomically. The counters are the hold's: the window or period the session opened in.
- A part the store cannot take (it does not answer, or answers an error) stays pending and is tried again, under
  the same id, before the next part and when the session ends: nothing is lost, and a part whose answer was lost
  after the store applied it is not charged twice (the store remembers a settled id for ``SETTLED_KEEP_MS``).
- Alerts: each charged part has the hold's alert thresholds checked, off the session's path, as a request's
  settlement has.
- The end (``finish``): the usage no part has covered yet (a response whose check was cut short) is one last part;
  then the hold itself is settled with its request counts as reserved and nothing on its token and cost items (the
  one token's worth reserved at admission returned), so nothing is counted twice.
"""

from __future__ import annotations

import logging

from gateway.observability.entry import tokens
from gateway.observability.record import RequestRecord
from gateway.policies.compiled import COST, REQUESTS, TOKENS
from gateway.policies.settle import Hold, Settler
from gateway.state.base import StateStoreError

log = logging.getLogger("gateway.policies")


class HoldParts:
    """One live hold settled in parts (see the module's docstring)."""

    __slots__ = ("settler", "hold", "provider", "model", "charged", "items", "alerted", "pending", "count",
                 "seen_input", "seen_output", "seen_total")

    def __init__(self, settler: Settler, hold: Hold, provider: str | None, model: str | None) -> None:
        assert hold.rid is not None, "a hold with token or cost items has a reservation id"
        self.settler = settler
        self.hold = hold
        self.provider = provider
        self.model = model
        #: indices (in the hold) of the items a part charges: every token and cost counter
        self.charged = [i for i, p in enumerate(hold.policies) if p.measure in (TOKENS, COST)]
        self.items = [hold.items[i] for i in self.charged]
        #: indices (in the hold) of the charged items whose policy has an alert threshold
        self.alerted = [i for i in self.charged if hold.policies[i].alert is not None]
        #: (part id, amounts per charged item) not yet taken by the store, oldest first
        self.pending: list[tuple[str, list[int]]] = []
        self.count = 0
        #: the usage handed over so far (input, output, total tokens)
        self.seen_input = self.seen_output = self.seen_total = 0

    @classmethod
    def of(cls, settler: Settler, hold: Hold | None, provider: str | None, model: str | None) -> HoldParts | None:
        """The parts of ``hold``, or None when it reserved no tokens and no cost (nothing to settle in parts)."""
        if hold is None or hold.rid is None or all(p.measure == REQUESTS for p in hold.policies):
            return None
        return cls(settler, hold, provider, model)

    def _add_part(self, input_tokens: int, output_tokens: int, total_tokens: int, model: str | None) -> None:
        """Queue the part of the usage beyond what was handed over already (nothing when there is none)."""
        part_in = input_tokens - self.seen_input
        part_out = output_tokens - self.seen_output
        part_total = total_tokens - self.seen_total
        if part_in <= 0 and part_out <= 0 and part_total <= 0:
            return
        self.seen_input, self.seen_output, self.seen_total = input_tokens, output_tokens, total_tokens
        policies = self.hold.policies
        cost = None
        amounts: list[int] = []
        for i in self.charged:
            if policies[i].measure == TOKENS:
                amounts.append(max(0, part_total))
            else:
                if cost is None:
                    cost = self.settler.prices.cost_micros(self.provider, self.model or model, max(0, part_in),
                                                           max(0, part_out))
                amounts.append(cost)
        if any(amounts):
            self.count += 1
            self.pending.append((f"{self.hold.rid}.{self.count}", amounts))

    async def settle(self, input_tokens: int, output_tokens: int, total_tokens: int, model: str | None = None) -> bool:
        """Charge what the session used since the last call (its usage so far: input, output and total tokens;
        ``model``, the one that answered, prices it when the session named none), with any part still pending
        first. True when the counters now hold every part; False when the store did not take one (kept pending)."""
        self._add_part(input_tokens, output_tokens, total_tokens, model)
        return await self.flush()

    async def flush(self) -> bool:
        """Charge the pending parts, oldest first; stop at the first the store does not take (False)."""
        hold, pending = self.hold, self.pending
        while pending:
            part_id, amounts = pending[0]
            try:
                await self.settler.store.settle(hold.scope, part_id, self.items, amounts)
            except StateStoreError:
                return False
            del pending[0]
            if self.alerted:
                self.settler.check_alerts_later(hold, self.alerted)
        return True

    def unsettled(self, index: int) -> int:
        """What the pending parts hold for the hold's item ``index`` (not in its counter yet)."""
        if not self.pending:
            return 0
        at = self.charged.index(index)
        return sum(amounts[at] for _, amounts in self.pending)

    def finish(self, record: RequestRecord) -> None:
        """The session ended (``record``: its summed usage): the rest as a last part, then the hold settled with
        nothing left on its token and cost items; off the session's path."""
        if record.usage is not None:
            tin, tout, total = tokens(record.usage)
            self._add_part(tin, tout, total or tin + tout, record.model)
        self.settler.later(self._settle_rest)

    async def _settle_rest(self) -> None:
        hold = self.hold
        if not await self.flush():
            log.warning("policy settlement: %d part(s) of a session's usage were not settled (the state store did "
                        "not take them)", len(self.pending))
        assert hold.rid is not None
        await self.settler.store.settle(hold.scope, hold.rid, hold.items, self.rest())
        watched = [i for i, p in enumerate(hold.policies) if p.alert is not None and p.measure == REQUESTS]
        if watched:
            self.settler.check_alerts_later(hold, watched)

    def rest(self) -> list[int]:
        """The hold's final amounts: its request counts as reserved, 0 on its token and cost items."""
        return [item.amount if policy.measure == REQUESTS else 0
                for item, policy in zip(self.hold.items, self.hold.policies)]

