"""The one bounded task set (gateway/task_set.py): what the cache writes, async guardrails and deferred log lines
run in. At its bound new work is not started (and never made), a finished task leaves room, and at shutdown the
set is waited for (bounded) or cancelled."""

from __future__ import annotations

import asyncio

from gateway.task_set import BoundedTasks
from gateway.waiting import within


async def test_work_beyond_the_bound_is_not_started_and_an_ended_task_leaves_room():
    gate = asyncio.Event()
    made: list[int] = []

    async def work(n: int) -> int:
        made.append(n)
        await gate.wait()
        return n

    tasks: BoundedTasks[int] = BoundedTasks(2)
    first, second = tasks.spawn(lambda: work(1)), tasks.spawn(lambda: work(2))
    assert first is not None and second is not None
    assert tasks.spawn(lambda: work(3)) is None and len(tasks) == 2
    gate.set()
    assert await within(first, 5.0) == 1 and await within(second, 5.0) == 2
    await asyncio.sleep(0)  # the done callbacks run
    assert len(tasks) == 0
    third = tasks.spawn(lambda: work(4))
    assert third is not None and await within(third, 5.0) == 4
    assert made == [1, 2, 4]  # the refused work was never made: no coroutine left unawaited


async def test_wait_is_bounded_and_cancel_unwinds_every_task():
    tasks: BoundedTasks[None] = BoundedTasks(4)
    quick = tasks.spawn(lambda: asyncio.sleep(0))
    stuck = tasks.spawn(lambda: asyncio.sleep(3600))
    assert quick is not None and stuck is not None
    await within(tasks.wait(0.2), 5.0)  # returns after its bound although one task still runs
    assert quick.done() and not stuck.done()
    await within(tasks.cancel(), 5.0)
    assert stuck.cancelled() and len(tasks) == 0

