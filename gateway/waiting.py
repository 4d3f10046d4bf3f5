"""Waiting with a deadline without losing a cancellation: the one way the gateway waits on an event or an
awaitable for at most some seconds.

``asyncio.wait_for`` is not used (ruff bans it): on Python 3.11 it returns the inner result, or turns the
inner cancellation into ``TimeoutError``, when a cancel lands in the same loop turn as the inner call finishing
or the deadline passing (CPython gh-86296, fixed in 3.12 by rebuilding ``wait_for`` on ``asyncio.timeout``). A
background loop that takes the timeout for "nothing happened" then never stops, and the worker's shutdown waits
on it for ever. ``asyncio.timeout`` counts cancellations (``Task.cancelling``) and lets an outside one through.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set (True) or ``seconds`` pass (False); a cancel always propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """``await awaitable``, raising ``TimeoutError`` (and cancelling it) after ``seconds``."""
    async with asyncio.timeout(seconds):
        return await awaitable

