"""The body watch: a body read waiting past the worker's body timeout is cancelled by a sweep and answers 408; a
body that comes in time leaves nothing behind. Sweeps are called by hand here (no timing); through the real gateway
with a raw socket: tests/http/test_body.py."""

from __future__ import annotations

import asyncio

import pytest

from gateway.http.body import read_request_body
from gateway.http.bodywatch import WATCH_STATE, BodyWatch
from gateway.http.errors import RequestTimeout
from gateway.jobs.multipart import MultipartParser
from gateway.jobs.uploads import multipart_events


def scope_with(watch: BodyWatch) -> dict:
    return {"headers": [], "state": {WATCH_STATE: watch}}


def stalled(*pieces: bytes):
    """A receive that hands over ``pieces`` (more to come after each), then waits for ever."""
    queue = list(pieces)
    never = asyncio.Event()

    async def receive() -> dict:
        if queue:
            return {"type": "http.request", "body": queue.pop(0), "more_body": True}
        await never.wait()
        raise AssertionError("unreachable")

    return receive


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_sweep_runs_often_enough_for_the_timeout():
    assert BodyWatch(60)._interval == 1.0 and BodyWatch(60)._limit == 60
    short = BodyWatch(0.8)
    assert short._interval == pytest.approx(0.1) and short._limit == 8


@pytest.mark.parametrize("pieces", [(), (b'{"model": ',)], ids=["nothing-after-the-headers", "a-first-piece"])
async def test_a_body_that_stops_arriving_is_a_408_once_the_timeout_has_passed(pieces):
    watch = BodyWatch(0.8)
    read = asyncio.create_task(read_request_body(scope_with(watch), stalled(*pieces), 1 << 20))
    await settle()
    assert list(watch.waiting.values()) == [0]  # waiting, since tick 0
    for _ in range(8):  # the timeout has not passed yet
        watch.sweep()
    await settle()
    assert not read.done()
    watch.sweep()
    with pytest.raises(RequestTimeout) as caught:
        await read
    assert (caught.value.status, caught.value.code, caught.value.param) == (408, "body_timeout", "body")
    assert "0.8 seconds" in caught.value.message
    assert watch.waiting == {} and read.cancelling() == 0


async def test_a_multipart_body_that_stops_arriving_is_a_408_too():
    watch = BodyWatch(0.8)

    async def drain() -> None:
        async for _ in multipart_events(stalled(b"--zz\r\n"), MultipartParser("zz"), "file", watch=watch):
            pass

    read = asyncio.create_task(drain())
    await settle()
    for _ in range(9):
        watch.sweep()
    with pytest.raises(RequestTimeout):
        await read
    assert watch.waiting == {}


async def test_a_body_that_comes_in_time_leaves_nothing_and_other_cancels_pass_through():
    watch = BodyWatch(0.8)
    pieces = [{"type": "http.request", "body": b"{", "more_body": True},
              {"type": "http.request", "body": b"}", "more_body": False}]

    async def receive() -> dict:
        return pieces.pop(0)

    assert await read_request_body(scope_with(watch), receive, 100) == b"{}"
    assert watch.waiting == {}
    read = asyncio.create_task(read_request_body(scope_with(watch), stalled(), 100))
    await settle()
    read.cancel()  # not the watch's: stays a cancellation
    with pytest.raises(asyncio.CancelledError):
        await read
    assert watch.waiting == {}


async def test_the_watch_sweeps_by_itself_while_started():
    watch = BodyWatch(0.2)
    await watch.start()
    try:
        read = asyncio.create_task(read_request_body(scope_with(watch), stalled(), 100))
        with pytest.raises(RequestTimeout):
            await _bounded(read, 20)
    finally:
        await watch.close()


async def _bounded(task: asyncio.Task, seconds: float):
    done, _ = await asyncio.wait({task}, timeout=seconds)
    assert done, "the watch did not end the read"
    return task.result()
