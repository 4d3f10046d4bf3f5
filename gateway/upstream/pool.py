"""The lean exchange's keep-alive pool: idle connections per upstream, limits on connections in use, an idle sweep.

Connections are kept per key (scheme, host, port: one upstream target). ``acquire`` lends the most recently used
idle connection of that key (a warm one: the upstream's keep-alive timer is the least likely to have run out),
dropping any the upstream closed meanwhile or that sat idle longer than GATEWAY_POOL_KEEPALIVE_S; else it connects
anew. As aiohttp's connector counts them, limits count connections in use, not idle ones: GATEWAY_POOL_SIZE in all
and GATEWAY_POOL_SIZE_PER_HOST per upstream (0: no limit); an exchange past a limit waits, in arrival order, for a
connection to come back (one of its upstream's is handed over at once) or for room to connect, until its deadline.

``put`` takes a connection back whose answer was read to its end and that may stay open (HTTP keep-alive); any other
goes through ``discard`` (closed, never reused). A sweep every few seconds closes connections idle past the
keep-alive, so an upstream's sockets are released even when no request goes there any more.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.upstream.connection import UpstreamConnection


class PoolTimeout(TimeoutError):
    """No connection came free (or could be opened) under the pool's limits before the deadline."""


class _Upstream:
    __slots__ = ("idle", "in_use")

    def __init__(self) -> None:
        self.idle: list[UpstreamConnection] = []
        self.in_use = 0


class ConnectionPool:
    """Keep-alive connections per upstream key (see the module docstring)."""

    def __init__(self, limit: int, limit_per_host: int, keepalive_s: float) -> None:
        self.limit = limit
        self.limit_per_host = limit_per_host
        self.keepalive_s = keepalive_s
        self.in_use = 0
        self._upstreams: dict[Any, _Upstream] = {}
        #: exchanges waiting for room: (key, future); a future's result is a connection handed over, or None (retry)
        self._waiters: deque[tuple[Any, asyncio.Future[UpstreamConnection | None]]] = deque()
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._schedule_sweep()

    def idle_count(self) -> int:
        return sum(len(upstream.idle) for upstream in self._upstreams.values())

    def take(self, key: Any) -> UpstreamConnection | None:
        """An idle connection to ``key``'s upstream, counted in use, or None (then ``acquire``): the common case,
        without a coroutine."""
        upstream = self._upstreams.get(key)
        if upstream is None or not upstream.idle:
            return None
        idle = upstream.idle
        now = self._loop.time()  # type: ignore[union-attr]
        while idle:
            conn = idle.pop()
            if conn.closed or now - conn.idle_since > self.keepalive_s:
                conn.abort()
                continue
            upstream.in_use += 1
            self.in_use += 1
            return conn
        return None

    async def acquire(self, key: Any, connect: Callable[[], Awaitable[UpstreamConnection]], deadline: float
                      ) -> UpstreamConnection:
        """A connection to ``key``'s upstream: an idle one, else a new one from ``connect`` (waiting, until the
        loop time ``deadline``, while the limits are reached)."""
        conn = self.take(key)
        if conn is not None:
            return conn
        upstream = self._upstreams.get(key)
        if upstream is None:
            upstream = self._upstreams[key] = _Upstream()
        while (self.limit and self.in_use >= self.limit) or (
                self.limit_per_host and upstream.in_use >= self.limit_per_host):
            handed = await self._wait(key, deadline)
            if handed is not None:
                return handed  # counted in use by ``put``
            # the sweep may have dropped this upstream's record while it had nothing idle or in use: counting on
            # the dropped one would leave this connection counted in use for good
            upstream = self._upstreams.setdefault(key, _Upstream())
            if upstream.idle:
                return await self.acquire(key, connect, deadline)
        return await self.connect(key, connect, upstream)

    async def connect(self, key: Any, connect: Callable[[], Awaitable[UpstreamConnection]],
                      upstream: _Upstream | None = None) -> UpstreamConnection:
        """A new connection to ``key``'s upstream, counted in use (also the one resend after a stale connection,
        which keeps the place of the connection it replaces: call ``discard`` on that one first)."""
        if upstream is None:
            upstream = self._upstreams.setdefault(key, _Upstream())
        upstream.in_use += 1
        self.in_use += 1
        try:
            return await connect()
        except BaseException:
            upstream.in_use -= 1
            self.in_use -= 1
            self._wake_one()
            raise

    def put(self, conn: UpstreamConnection) -> None:
        """Take back a connection whose answer was read to its end and may stay open."""
        conn.finish()
        conn.answers += 1
        upstream = self._upstreams.get(conn.key)
        if upstream is None:  # the pool closed meanwhile
            conn.abort()
            return
        for i, (key, waiter) in enumerate(self._waiters):  # one waiting for this upstream takes it as it is
            if key == conn.key and not waiter.done():
                del self._waiters[i]
                waiter.set_result(conn)
                return
        upstream.in_use -= 1
        self.in_use -= 1
        conn.idle_since = self._loop.time()  # type: ignore[union-attr]
        upstream.idle.append(conn)
        self._wake_one()

    def discard(self, conn: UpstreamConnection) -> None:
        """Close a connection lent by ``acquire`` or ``connect`` (never reused): room for a waiting exchange."""
        conn.finish()
        conn.abort()
        upstream = self._upstreams.get(conn.key)
        if upstream is not None:
            upstream.in_use -= 1
            self.in_use -= 1
        self._wake_one()

    async def _wait(self, key: Any, deadline: float) -> UpstreamConnection | None:
        loop = self._loop
        assert loop is not None, "ConnectionPool.start() was not called"
        waiter: asyncio.Future[UpstreamConnection | None] = loop.create_future()
        entry = (key, waiter)
        self._waiters.append(entry)
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                handed = waiter.result()
                if handed is not None:  # handed over as this exchange gave up: give it back
                    self.put_back(handed)
                else:  # room was made for this exchange as it gave up: the next in line takes it
                    self._wake_one()
            raise
        finally:
            timer.cancel()
            try:
                self._waiters.remove(entry)
            except ValueError:
                pass

    def put_back(self, conn: UpstreamConnection) -> None:
        """A connection handed to an exchange that left before using it: back to the pool."""
        conn.answers -= 1  # ``put`` counts an answer it did not carry
        self.put(conn)

    def _wake_one(self) -> None:
        waiters = self._waiters
        while waiters:
            _, waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _schedule_sweep(self) -> None:
        loop = self._loop
        if loop is not None:
            self._sweeper = loop.call_later(max(1.0, min(self.keepalive_s / 2, 15.0)), self._sweep)

    def _sweep(self) -> None:
        now = self._loop.time()  # type: ignore[union-attr]
        for key, upstream in list(self._upstreams.items()):
            kept = []
            for conn in upstream.idle:
                if conn.closed or now - conn.idle_since > self.keepalive_s:
                    conn.abort()
                else:
                    kept.append(conn)
            upstream.idle = kept
            if not kept and not upstream.in_use:
                del self._upstreams[key]
        self._schedule_sweep()

    def close(self) -> None:
        """Close every idle connection and stop the sweep (connections in use close as their exchanges end)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for upstream in self._upstreams.values():
            for conn in upstream.idle:
                conn.abort()
        self._upstreams.clear()
        self._loop = None
        while self._waiters:
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolTimeout("the upstream pool closed"))


def _expire(waiter: asyncio.Future[UpstreamConnection | None]) -> None:
    if not waiter.done():
        waiter.set_exception(PoolTimeout("no upstream connection came free in time"))
