"""The disconnect watch of streamed answers: a client leaving while the upstream is silent cancels the relay."""

from __future__ import annotations

import asyncio

from gateway.http.disconnect import DisconnectWatch
from gateway.waiting import within


def _receiver(messages: list[dict], calls: list[int]):
    async def receive() -> dict:
        calls.append(1)
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}
    return receive


def test_the_watch_cancels_the_relay_when_the_client_leaves():
    async def scenario() -> tuple[bool, bool]:
        calls: list[int] = []
        relay = asyncio.ensure_future(asyncio.sleep(3600))
        await asyncio.sleep(0)
        watch = DisconnectWatch(_receiver([{"type": "http.disconnect"}], calls), relay, after_s=0.01)
        try:
            await within(asyncio.shield(relay), 2)
        except asyncio.CancelledError:
            pass
        fired = watch.fired()
        watch.stop()
        return relay.cancelled(), fired

    cancelled, fired = asyncio.run(scenario())
    assert cancelled and fired


def test_a_stream_that_ends_before_the_delay_never_reads_the_client():
    async def scenario() -> tuple[int, bool, bool]:
        calls: list[int] = []
        relay = asyncio.ensure_future(asyncio.sleep(3600))
        watch = DisconnectWatch(_receiver([{"type": "http.disconnect"}], calls), relay, after_s=0.2)
        watch.stop()
        await asyncio.sleep(0.3)
        result = len(calls), relay.cancelled(), watch.fired()
        relay.cancel()
        return result

    calls, cancelled, fired = asyncio.run(scenario())
    assert calls == 0 and not cancelled and not fired
