"""The lean exchange's pool (``gateway.upstream.pool``) through ``LeanTransport``: the per-host and total limits
(a request past them waits for a connection and gets it, or a 504 once the read timeout runs out), answers left
before their end never reused, a cancelled request closing its connection and freeing its place, keep-alive expiry,
and a closed transport closing its idle connections."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.http.errors import GatewayError
from gateway.upstream.connection import UpstreamConnection
from gateway.upstream.pool import ConnectionPool
from gateway.upstream.request import UpstreamRequest
from tests.support.lean import ScriptedConnection, ScriptedUpstream, answer, fetch, lean_transport


class GatedUpstream(ScriptedUpstream):
    """Answers every request once ``gate`` is set; ``arrived`` is set as each request arrives."""

    def __init__(self) -> None:
        super().__init__(self._serve_gated)
        self.gate = asyncio.Event()
        self.arrived = asyncio.Event()
        #: set when a connection was closed by the client before its answer was written
        self.abandoned = asyncio.Event()

    async def _serve_gated(self, conn: ScriptedConnection) -> None:
        while await conn.request():
            self.arrived.set()
            gate = asyncio.ensure_future(self.gate.wait())
            left = asyncio.ensure_future(conn.closed_by_client())
            await asyncio.wait([gate, left], return_when=asyncio.FIRST_COMPLETED)
            if left.done():
                gate.cancel()
                self.abandoned.set()
                return
            left.cancel()  # the client sends nothing more before its answer: nothing was read
            with contextlib.suppress(asyncio.CancelledError):
                await left
            await conn.send(answer(200, b"n=%d" % len(self.requests)))


async def test_a_request_past_the_per_host_limit_waits_and_then_gets_the_connection():
    async with GatedUpstream() as upstream, lean_transport(pool_size_per_host=1) as transport:
        first = asyncio.ensure_future(fetch(transport, upstream.url))
        await upstream.arrived.wait()
        second = asyncio.ensure_future(fetch(transport, upstream.url))
        await asyncio.sleep(0.1)
        assert not second.done() and len(upstream.requests) == 1  # waiting for the pool, not sent
        upstream.gate.set()
        assert (await first)[::2] == (200, b"n=1")
        assert (await second)[::2] == (200, b"n=2")
        assert transport.pool.in_use == 0
    assert upstream.connections == 1  # the second request took the first one's connection


async def test_a_request_past_the_total_limit_waits_for_room_to_another_host():
    async with GatedUpstream() as upstream, lean_transport(pool_size=1) as transport:
        first = asyncio.ensure_future(fetch(transport, upstream.url))
        await upstream.arrived.wait()
        other_host = asyncio.ensure_future(fetch(transport, upstream.url.replace("127.0.0.1", "localhost")))
        await asyncio.sleep(0.1)
        assert not other_host.done() and len(upstream.requests) == 1
        upstream.gate.set()
        assert (await first)[0] == 200 and (await other_host)[0] == 200
    assert upstream.connections == 2


async def test_no_room_before_the_read_timeout_is_a_504_naming_the_pool_limits():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await conn.closed_by_client()

    async with ScriptedUpstream(serve) as upstream, \
            lean_transport(pool_size_per_host=1, upstream_read_timeout_ms=300) as transport:
        held = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"), stream=True)
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url)
        held.close()
        assert transport.pool.in_use == 0
    assert error.value.status == 504
    assert "free connection" in error.value.message and "GATEWAY_POOL_SIZE_PER_HOST" in error.value.message
    assert upstream.connections == 1


@pytest.mark.parametrize("leave", ["close", "release"])
async def test_an_answer_left_before_its_end_is_never_reused(leave):
    seen_closed: asyncio.Queue[bool] = asyncio.Queue()

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        seen_closed.put_nowait(await conn.closed_by_client())

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        for _ in range(2):
            resp = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"), stream=True)
            assert await resp.read_some() == b"first"
            getattr(resp, leave)()
            assert await seen_closed.get() is True  # the upstream saw its connection closed
    assert upstream.connections == 2


async def test_a_cancelled_request_closes_its_connection_and_frees_its_place():
    async with GatedUpstream() as upstream, lean_transport(pool_size_per_host=1) as transport:
        waiting = asyncio.ensure_future(fetch(transport, upstream.url))
        await upstream.arrived.wait()
        waiting.cancel()
        await upstream.abandoned.wait()  # the upstream sees its connection closed
        assert transport.pool.in_use == 0
        upstream.gate.set()
        assert (await fetch(transport, upstream.url))[0] == 200
    assert upstream.connections == 2


async def test_a_request_cancelled_while_waiting_for_the_pool_leaves_no_trace():
    async with GatedUpstream() as upstream, lean_transport(pool_size_per_host=1) as transport:
        first = asyncio.ensure_future(fetch(transport, upstream.url))
        await upstream.arrived.wait()
        queued = asyncio.ensure_future(fetch(transport, upstream.url))
        await asyncio.sleep(0.05)
        queued.cancel()
        upstream.gate.set()
        assert (await first)[0] == 200
        assert (await fetch(transport, upstream.url))[0] == 200
        assert transport.pool.in_use == 0
    assert upstream.connections == 1 and len(upstream.requests) == 2


async def test_an_idle_connection_older_than_the_keep_alive_is_not_reused():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(answer(200, b"ok"))

    async with ScriptedUpstream(serve) as upstream, lean_transport(pool_keepalive_s=0.2) as transport:
        await fetch(transport, upstream.url)
        await asyncio.sleep(0.5)
        assert (await fetch(transport, upstream.url))[0] == 200
    assert upstream.connections == 2


async def test_closing_the_transport_closes_its_idle_connections():
    closed = asyncio.Event()

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(answer(200, b"ok"))
        if await conn.closed_by_client():
            closed.set()

    async with ScriptedUpstream(serve) as upstream:
        async with lean_transport() as transport:
            await fetch(transport, upstream.url)
            assert transport.pool.idle_count() == 1
        await closed.wait()


class Dialer:
    """``connect`` for a bare ``ConnectionPool``: connections without a socket, counted."""

    def __init__(self) -> None:
        self.made: list[UpstreamConnection] = []

    async def __call__(self) -> UpstreamConnection:
        conn = UpstreamConnection(asyncio.get_running_loop(), "k")
        self.made.append(conn)
        return conn


async def test_room_given_to_a_request_cancelled_before_it_used_it_passes_to_the_next():
    pool = ConnectionPool(0, 1, 60)
    pool.start()
    dial = Dialer()
    deadline = asyncio.get_running_loop().time() + 5
    first = await pool.acquire("k", dial, deadline)
    cancelled = asyncio.ensure_future(pool.acquire("k", dial, deadline))
    patient = asyncio.ensure_future(pool.acquire("k", dial, deadline))
    await asyncio.sleep(0.01)
    pool.discard(first)  # room for one: given to the first in line...
    cancelled.cancel()  # ...which leaves before it takes it
    second = await patient
    assert second is dial.made[1] and pool.in_use == 1
    pool.put(second)
    pool.close()


async def test_an_upstream_swept_while_a_request_waited_for_it_keeps_its_count():
    pool = ConnectionPool(1, 1, 60)
    pool.start()
    dial = Dialer()
    deadline = asyncio.get_running_loop().time() + 5
    first = await pool.acquire("k", dial, deadline)
    waiting = asyncio.ensure_future(pool.acquire("k", dial, deadline))
    await asyncio.sleep(0.01)
    pool.discard(first)
    pool._sweep()  # the idle sweep runs before the waiting request resumes: "k" has nothing idle or in use
    second = await waiting
    pool.put(second)
    assert pool.in_use == 0
    assert await pool.acquire("k", dial, asyncio.get_running_loop().time() + 0.3) is second  # not a PoolTimeout
    pool.close()
