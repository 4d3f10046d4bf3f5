"""The StateStore contract, on every backend: budgets (reserve, settle, usage) exact under concurrency."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from gateway.state.base import BudgetItem

HOUR_MS = 3_600_000


def scope() -> str:
    return "ws-" + uuid.uuid4().hex[:12]


def item(key: str, limit: int, amount: int = 1, ttl_ms: int = HOUR_MS, cut: bool = False) -> BudgetItem:
    return BudgetItem(key, limit, amount, ttl_ms, cut)


async def test_reserve_admits_up_to_the_limit_then_names_the_counter(store):
    s = scope()
    for _ in range(3):
        assert (await store.reserve(s, [item("rpm:1", 3)])).admitted
    refused = await store.reserve(s, [item("rpm:1", 3)])
    assert not refused.admitted
    assert (refused.index, refused.key, refused.used, refused.limit) == (0, "rpm:1", 3, 3)
    assert await store.usage(s, ["rpm:1", "missing"]) == [3, 0]


async def test_reserve_is_all_or_nothing_across_items(store):
    s = scope()
    assert (await store.reserve(s, [item("tpm", 100, 60)])).admitted
    refused = await store.reserve(s, [item("rpm", 10), item("tpm", 100, 50), item("rpd", 10)])
    assert not refused.admitted
    assert (refused.index, refused.key, refused.used) == (1, "tpm", 60)
    assert await store.usage(s, ["rpm", "tpm", "rpd"]) == [0, 60, 0]  # nothing changed
    assert (await store.reserve(s, [item("rpm", 10), item("tpm", 100, 40), item("rpd", 10)])).admitted
    assert await store.usage(s, ["rpm", "tpm", "rpd"]) == [1, 100, 1]


async def test_scopes_are_separate(store):
    a, b = scope(), scope()
    assert (await store.reserve(a, [item("k", 1)])).admitted
    assert (await store.reserve(b, [item("k", 1)])).admitted
    assert not (await store.reserve(a, [item("k", 1)])).admitted


async def test_a_counter_resets_when_its_window_key_expires(store):
    s = scope()
    assert (await store.reserve(s, [item("w", 1, ttl_ms=150)])).admitted
    assert not (await store.reserve(s, [item("w", 1, ttl_ms=150)])).admitted
    await asyncio.sleep(0.5)
    assert (await store.reserve(s, [item("w", 1, ttl_ms=150)])).admitted


async def test_n_concurrent_reserves_against_limit_k_admit_exactly_k(store):
    s = scope()
    answers = await asyncio.gather(*(store.reserve(s, [item("rpm", 7), item("tpd", 10_000, 5)])
                                     for _ in range(40)))
    assert sum(a.admitted for a in answers) == 7
    assert await store.usage(s, ["rpm", "tpd"]) == [7, 35]


async def test_settle_replaces_the_reserved_amount_once(store):
    s = scope()
    items = [item("tpm", 1000, 300), item("cost", 10**9, 5000)]
    assert (await store.reserve(s, items, "req-1", 60_000)).admitted
    assert await store.usage(s, ["tpm", "cost"]) == [300, 5000]
    assert await store.settle(s, "req-1", items, [120, 2000]) == "settled"
    assert await store.usage(s, ["tpm", "cost"]) == [120, 2000]
    assert await store.settle(s, "req-1", items, [120, 2000]) == "duplicate"
    assert await store.usage(s, ["tpm", "cost"]) == [120, 2000]


async def test_settle_may_go_over_the_limit_and_then_refuses_the_next(store):
    s = scope()
    items = [item("tpm", 100, 50)]
    assert (await store.reserve(s, items, "r1", 60_000)).admitted
    assert await store.settle(s, "r1", items, [130]) == "settled"
    refused = await store.reserve(s, [item("tpm", 100, 1)])
    assert (refused.admitted, refused.used) == (False, 130)


async def test_a_retried_reserve_with_the_same_id_counts_once(store):
    s = scope()
    items = [item("rpm", 10, 4)]
    assert (await store.reserve(s, items, "same", 60_000)).admitted
    assert (await store.reserve(s, items, "same", 60_000)).admitted
    assert await store.usage(s, ["rpm"]) == [4]


async def test_an_expired_reservation_is_released_and_a_late_settle_charges_the_actual(store):
    s = scope()
    items = [item("tpm", 100, 80)]
    assert (await store.reserve(s, items, "slow", 150)).admitted
    assert not (await store.reserve(s, [item("tpm", 100, 30)])).admitted
    await asyncio.sleep(0.5)
    assert await store.usage(s, ["tpm"]) == [0]  # a dead worker's reservation does not leak
    assert (await store.reserve(s, [item("tpm", 100, 30)])).admitted
    assert await store.settle(s, "slow", items, [25]) == "late"
    assert await store.usage(s, ["tpm"]) == [55]
    assert await store.settle(s, "slow", items, [25]) == "duplicate"
    assert await store.usage(s, ["tpm"]) == [55]


async def test_a_late_settle_skips_counters_whose_window_is_gone(store):
    s = scope()
    items = [item("minute", 100, 10, ttl_ms=150), item("day", 1000, 10)]
    assert (await store.reserve(s, items, "r", 150)).admitted
    await asyncio.sleep(0.5)
    assert await store.settle(s, "r", items, [7, 7]) == "late"
    assert await store.usage(s, ["minute", "day"]) == [0, 7]


async def test_concurrent_settles_of_one_id_apply_once(store):
    s = scope()
    items = [item("tpm", 1000, 100)]
    assert (await store.reserve(s, items, "r", 60_000)).admitted
    outcomes = await asyncio.gather(*(store.settle(s, "r", items, [40]) for _ in range(10)))
    assert sorted(outcomes) == ["duplicate"] * 9 + ["settled"]
    assert await store.usage(s, ["tpm"]) == [40]


async def test_reserve_with_an_id_needs_a_ttl(store):
    with pytest.raises(ValueError):
        await store.reserve(scope(), [item("k", 1)], "id", None)


async def test_a_cut_item_is_admitted_while_its_budget_is_not_spent_and_reserves_what_remains(store):
    """A token or cost budget: an estimate larger than the whole budget still gets the first request in, with its
    reservation cut to what remains; once spent, even the smallest estimate is refused."""
    s = scope()
    first = await store.reserve(s, [item("rpm", 10), item("tokens", 10, 1058, cut=True)], "r1", 60_000)
    assert first.admitted and first.amounts == (1, 10)
    assert await store.usage(s, ["rpm", "tokens"]) == [1, 10]
    refused = await store.reserve(s, [item("rpm", 10), item("tokens", 10, 1, cut=True)], "r2", 60_000)
    assert (refused.admitted, refused.index, refused.key, refused.used, refused.limit) == (False, 1, "tokens", 10, 10)
    assert await store.usage(s, ["rpm", "tokens"]) == [1, 10]  # nothing changed
    # settling replaces the cut reservation (10), not the estimate, by the real usage
    assert await store.settle(s, "r1", [item("rpm", 10), item("tokens", 10, 10, cut=True)], [1, 4]) == "settled"
    assert await store.usage(s, ["tokens"]) == [4]
    whole = await store.reserve(s, [item("tokens", 10, 3, cut=True)], "r3", 60_000)
    assert whole.admitted and whole.amounts == ()  # it fitted: nothing was cut
    cut = await store.reserve(s, [item("tokens", 10, 50, cut=True)], "r4", 60_000)
    assert cut.admitted and cut.amounts == (3,)
    assert await store.usage(s, ["tokens"]) == [10]


async def test_a_cut_item_of_amount_zero_passes_a_spent_budget_and_an_expired_cut_reservation_releases_its_cut(store):
    s = scope()
    assert (await store.reserve(s, [item("cost", 5, 9, ttl_ms=HOUR_MS, cut=True)], "r1", 150)).admitted
    assert (await store.reserve(s, [item("cost", 5, 0, cut=True)])).admitted  # an unpriced model costs nothing
    assert not (await store.reserve(s, [item("cost", 5, 1, cut=True)])).admitted
    await asyncio.sleep(0.5)
    assert await store.usage(s, ["cost"]) == [0]  # the 5 reserved, not the 9 asked, were released


async def test_concurrent_cut_reserves_never_reserve_past_the_limit(store):
    s = scope()
    answers = await asyncio.gather(*(store.reserve(s, [item("tokens", 100, 30, cut=True)], f"r{i}", 60_000)
                                     for i in range(20)))
    admitted = [a for a in answers if a.admitted]
    assert len(admitted) == 4  # 30 + 30 + 30 + the 10 left
    assert sorted(a.amounts for a in admitted) == [(), (), (), (10,)]
    assert await store.usage(s, ["tokens"]) == [100]


async def test_workspaces_whose_ids_extend_one_another_never_share_a_counter(store):
    # the policies' scope is the workspace id: ids made before workspace ids were checked may hold ':' or braces
    base = scope()
    scopes = [base, base + ":blue", base + "}:c", "{" + base + "}", base + "/x"]
    for s in scopes:
        assert (await store.reserve(s, [item("r:policy:t:b", 1)])).admitted, s
    for s in scopes:
        assert await store.usage(s, ["r:policy:t:b"]) == [1], s
        assert not (await store.reserve(s, [item("r:policy:t:b", 1)])).admitted, s
