"""The event-loop lag monitor: an idle loop fires on time, a blocked one is measured as late as it was."""

from __future__ import annotations

import asyncio
import time

from gateway.observability.looplag import LoopLagMonitor


async def test_a_blocked_loop_shows_up_as_lag():
    seen: list[float] = []
    monitor = LoopLagMonitor(interval_s=0.05, observe=lambda lag, worker: seen.append(lag))
    monitor.start()
    try:
        await asyncio.sleep(0.2)
        idle = list(seen)
        time.sleep(0.3)  # noqa: ASYNC251 - a blocking call on the loop on purpose: the timer cannot fire meanwhile
        await asyncio.sleep(0.12)
    finally:
        monitor.stop()
    assert len(idle) >= 2 and min(idle) < 0.05
    assert max(seen) >= 0.2
    count = len(seen)
    await asyncio.sleep(0.15)
    assert len(seen) == count  # stopped
