"""Waiting with a deadline: the event or the deadline decides, and a cancel always wins (the case Python 3.11's
``asyncio.wait_for`` gets wrong, which the gateway's background loops rely on to stop)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.waiting import wait_event, within


async def test_wait_event_tells_a_set_event_from_a_passed_deadline():
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, 5) is True
    assert await wait_event(event, 0) is True  # already set: no wait at all


async def test_within_returns_the_answer_or_raises_timeout_and_cancels_the_work():
    assert await within(asyncio.sleep(0, "answer"), 1) == "answer"
    work = asyncio.ensure_future(asyncio.sleep(10))
    with pytest.raises(TimeoutError):
        await within(work, 0.01)
    assert work.cancelled()


@pytest.mark.parametrize("deadline_s", [5.0, 0.0005])
async def test_a_cancel_landing_as_the_event_is_set_or_the_deadline_passes_stops_the_waiter(deadline_s):
    """A loop of ``wait_event`` is cancelled at every loop turn, in the same turn as the event is set: each time
    it ends cancelled instead of going round again."""
    went_on = []
    for turns in range(30):
        event = asyncio.Event()

        async def loop(event: asyncio.Event) -> None:
            while True:
                await wait_event(event, deadline_s)
                event.clear()

        task = asyncio.create_task(loop(event))
        for _ in range(turns):
            await asyncio.sleep(0)
        event.set()
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        if not done:
            went_on.append(turns)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        else:
            assert task.cancelled()
    assert went_on == []
