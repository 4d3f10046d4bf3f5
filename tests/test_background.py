"""The one way a service starts its background work (gateway/background.py): a crash is logged with the task's
name, close lets the work finish when asked and otherwise cancels it and waits (bounded), and nothing starts after
close."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from gateway.background import BackgroundTask
from gateway.waiting import within


async def test_work_that_ends_by_an_error_is_logged_with_its_name(caplog: pytest.LogCaptureFixture):
    async def broken() -> None:
        raise ValueError("the disk is gone")

    task = BackgroundTask("test-writer")
    with caplog.at_level(logging.ERROR, logger="gateway"):
        assert task.start(broken)
        assert await within(task.join(), 5.0)
        await asyncio.sleep(0)  # the done callback runs
    [record] = [r for r in caplog.records if "test-writer" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)
    assert not task.running
    await task.close()


async def test_close_cancels_the_work_and_waits_until_it_has_unwound():
    unwound = asyncio.Event()

    async def loop() -> None:
        try:
            await asyncio.Event().wait()  # never set: only the cancel ends it
        finally:
            unwound.set()

    task = BackgroundTask("test-loop")
    assert task.start(loop)
    await asyncio.sleep(0)  # the loop is inside its sleep
    await within(task.close(), 5.0)
    assert unwound.is_set() and not task.running


async def test_close_lets_work_that_was_asked_to_stop_finish_without_cancelling_it():
    stop = asyncio.Event()
    finished: list[str] = []

    async def writer() -> None:
        await stop.wait()
        await asyncio.sleep(0.05)  # the last batch
        finished.append("flushed")

    task = BackgroundTask("test-flush")
    assert task.start(writer)
    stop.set()
    await within(task.close(grace_s=5.0), 10.0)
    assert finished == ["flushed"]


async def test_close_of_work_that_ignores_its_cancellation_returns_within_its_bound(
        caplog: pytest.LogCaptureFixture):
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    task = BackgroundTask("test-stubborn")
    assert task.start(stubborn)
    await asyncio.sleep(0)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gateway"):
        await within(task.close(cancel_wait_s=0.2), 5.0)
    assert time.monotonic() - began < 4.0
    assert any("test-stubborn" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    release.set()  # let the stubborn work end so the test leaves no task behind
    assert task.running
    for _ in range(100):  # bounded: it ends at its next wake-up
        task._task.cancel()  # type: ignore[union-attr]
        if await task.join(0.05):
            break
    assert not task.running


async def test_nothing_starts_after_close_and_the_refused_work_is_never_made():
    made: list[str] = []

    async def work() -> None:
        made.append("ran")

    task = BackgroundTask("test-late")
    await task.close()
    assert task.closed
    assert not task.start(work)
    await asyncio.sleep(0)
    assert made == [] and not task.running


async def test_one_task_at_a_time_and_work_that_ended_may_start_again():
    gate = asyncio.Event()
    runs: list[int] = []

    async def poller() -> None:
        runs.append(len(runs))
        await gate.wait()

    task = BackgroundTask("test-tail")
    assert task.start(poller)
    assert not task.start(poller)  # it runs already
    await asyncio.sleep(0)
    gate.set()
    assert await within(task.join(), 5.0)
    assert task.start(poller)  # ended by itself: the next subscriber starts it again
    assert await within(task.join(), 5.0)
    assert runs == [0, 1]
    await task.close()


async def test_a_cancelled_close_cancels_the_work_too():
    async def loop() -> None:
        await asyncio.sleep(3600)

    task = BackgroundTask("test-cancelled-close")
    assert task.start(loop)
    await asyncio.sleep(0)
    closing = asyncio.get_running_loop().create_task(task.close(grace_s=3600))
    await asyncio.sleep(0.01)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert await within(task.join(), 5.0)
    assert not task.running
