"""The StateStore contract, on every backend: circuit-breaker operations (failures within a rolling window)."""

from __future__ import annotations

import asyncio
import uuid

T0 = 1_700_000_000_000
WINDOW = 30_000
COOLDOWN = 30_000


def key() -> str:
    return "cb-" + uuid.uuid4().hex[:12]


async def test_opens_at_the_threshold_within_the_window(store):
    k = key()
    assert await store.breaker_open_until(k) == 0
    assert not await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0)
    assert not await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + 1000)
    assert await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + 2000)
    assert await store.breaker_open_until(k) == T0 + 2000 + COOLDOWN


async def test_failures_older_than_the_window_do_not_count(store):
    k = key()
    assert not await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0)
    assert not await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + 1000)
    assert not await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + WINDOW + 500)  # the first fell out
    assert await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + WINDOW + 900)


async def test_successes_in_between_do_not_erase_failures(store):
    k = key()
    for i in range(2):
        assert not await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + i * 2)
        await store.breaker_success(k, T0 + i * 2 + 1)
    assert await store.breaker_failure(k, 3, WINDOW, COOLDOWN, T0 + 10)


async def test_failures_while_open_are_ignored(store):
    k = key()
    assert await store.breaker_failure(k, 1, WINDOW, COOLDOWN, T0)
    assert not await store.breaker_failure(k, 1, WINDOW, COOLDOWN, T0 + 5)  # in flight before it opened
    assert await store.breaker_open_until(k) == T0 + COOLDOWN


async def test_half_open_failure_reopens_at_once_and_success_closes(store):
    k = key()
    assert not await store.breaker_failure(k, 2, WINDOW, COOLDOWN, T0)
    assert await store.breaker_failure(k, 2, WINDOW, COOLDOWN, T0 + 1)
    after = T0 + 1 + COOLDOWN + 1
    assert await store.breaker_failure(k, 2, WINDOW, COOLDOWN, after)  # half-open: one failure reopens
    assert await store.breaker_open_until(k) == after + COOLDOWN
    later = after + COOLDOWN + 1
    await store.breaker_success(k, later)  # the probe succeeded: closed
    assert await store.breaker_open_until(k) == 0
    assert not await store.breaker_failure(k, 2, WINDOW, COOLDOWN, later + 1)  # counts from zero again


async def test_a_success_while_open_does_not_close(store):
    k = key()
    assert await store.breaker_failure(k, 1, WINDOW, COOLDOWN, T0)
    await store.breaker_success(k, T0 + 10)
    assert await store.breaker_open_until(k) == T0 + COOLDOWN


async def test_concurrent_failures_open_the_breaker_once(store):
    k = key()
    opened = await asyncio.gather(*(store.breaker_failure(k, 5, WINDOW, COOLDOWN, T0 + i) for i in range(20)))
    assert opened.count(True) == 1
