"""Settlement: real amounts per item, one settle per reservation, alerts once per period, the bounded queue."""

from __future__ import annotations

from gateway.controlplane.policies import Condition, GroupBy, UsageLimitPolicy
from gateway.observability.cost import Prices
from gateway.observability.record import RequestRecord
from gateway.policies.compiled import CompiledPolicy, bucket_of
from gateway.policies.settle import Hold, Settler, actual_amounts, alerts_log
from gateway.schema.common import Usage
from gateway.state.base import BudgetItem
from gateway.state.memory import MemoryStateStore
from gateway.waiting import within


def policy(type_: str, limit: float = 1000, alert: float | None = None) -> CompiledPolicy:
    return CompiledPolicy(UsageLimitPolicy(
        id=f"p-{type_}", type=type_, credit_limit=limit, alert_threshold=alert,
        conditions=[Condition("model", "*")], group_by=[GroupBy("workspace_id")],
        created_at="2026-01-01T00:00:00.000Z"))


def hold_for(policies: list[CompiledPolicy], amounts: list[int], rid: str | None = "r1") -> Hold:
    items = [BudgetItem(f"u:{p.id}:all:b", p.limit, a, 60_000) for p, a in zip(policies, amounts)]
    return Hold("ws", rid, items, policies, [bucket_of(["ws"])] * len(policies), None)


def finished(status: int = 200, usage: Usage | None = None, ttft: float | None = None) -> RequestRecord:
    record = RequestRecord("t", "chat", 0.0)
    record.status, record.usage, record.ttft_s = status, usage, ttft
    record.provider, record.model = "vendorA", "gpt-4o-mini"
    return record


def test_actual_amounts_follow_the_answer():
    policies = [policy("requests"), policy("tokens"), policy("cost")]
    hold = hold_for(policies, [1, 500, 90])
    usage = Usage(prompt_tokens=10, completion_tokens=20, total_tokens=30)
    prices = Prices()
    expected_cost = prices.cost_micros("vendorA", "gpt-4o-mini", 10, 20)
    assert actual_amounts(hold, finished(usage=usage), prices) == [1, 30, expected_cost]
    # no usage reported: an answered request keeps its reservation, a failed one counts no tokens
    assert actual_amounts(hold, finished(), prices) == [1, 500, 90]
    assert actual_amounts(hold, finished(status=499, ttft=0.1), prices) == [1, 500, 90]
    assert actual_amounts(hold, finished(status=502), prices) == [1, 0, 0]


async def test_a_reservation_is_settled_once_and_alerts_are_recorded_once():
    store = MemoryStateStore()
    settler = Settler(store, Prices())
    tokens = policy("tokens", limit=1000, alert=100)
    hold = hold_for([tokens], [400])
    assert (await store.reserve("ws", hold.items, "r1", 60_000)).admitted
    record = finished(usage=Usage(prompt_tokens=50, completion_tokens=100, total_tokens=150))
    settler.submit(hold, record)
    settler.submit(hold, record)  # a second finish of the same request changes nothing
    await settler.close()
    assert await store.usage("ws", [hold.items[0].key]) == [150]
    alerts = await store.log_read(alerts_log(tokens.id), 0, 10)
    assert len(alerts) == 1
    settler.submit(hold_for([tokens], [0], rid=None), record)  # over the threshold again: same period, no alert
    await settler.close()
    assert len(await store.log_read(alerts_log(tokens.id), 0, 10)) == 1


async def test_a_full_queue_drops_instead_of_blocking():
    store = MemoryStateStore()
    settler = Settler(store, Prices(), queue_max=2, tasks=1)
    settler.start()
    hold = hold_for([policy("tokens")], [10])
    for _ in range(5):
        settler.submit(hold, finished())
    assert settler.dropped == 3
    await within(settler.close(), 5)
