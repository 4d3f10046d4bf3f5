"""The relay of one accepted Realtime session: frames both ways as they arrive, the limits, and how it ends.

Two pumps, one per direction, each reading one message and writing it before reading the next: text stays text,
binary stays binary, order is kept. That is the backpressure: a side that reads slowly holds the pump that writes
to it, which then stops reading from the other side, so per direction the gateway holds at most one message (at
most GATEWAY_REALTIME_MAX_MESSAGE_BYTES) besides the transports' own write buffers (aiohttp's 64 KiB high-water
mark towards the provider; the server's towards the client). Pings are answered where they arrive (the server for
the client, aiohttp for the provider) and never relayed.

How a session ends (``Ending``: the code and reason the client is closed with, who ended it):

- the provider closes: the client is closed with the provider's code (1005 becomes 1000) and reason (cut to 123
  bytes);
- the client closes or leaves: the provider's socket is closed with the client's code (1000 for one a close frame
  may not carry);
- the provider's connection is lost without a close (reset, dropped, a broken frame): the client gets **1011** with
  the reason ``upstream connection lost``;
- a message larger than the limit from either side: **1009** to the client (``message larger than N bytes``) and
  the provider's socket closed;
- no message either way for GATEWAY_REALTIME_IDLE_TIMEOUT_MS: **1001** ``idle timeout``; the worker stopping:
  **1001** ``gateway shutting down``;
- a response whose usage spends one of the session's budgets (``budget.py``): an ``error`` event, then **1008**
  ``usage limit exceeded``.

Whatever ends it, both pumps and the watch are cancelled and awaited before ``run`` returns: no task outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import aiohttp

from gateway.http.websocket import ClientSocket, sendable
from gateway.realtime.budget import CLOSE_CODE as BUDGET_CLOSE_CODE
from gateway.realtime.budget import CLOSE_REASON as BUDGET_CLOSE_REASON
from gateway.realtime.budget import BudgetWatch
from gateway.realtime.usage import SessionUsage
from gateway.waiting import wait_event, within

LOST = "upstream connection lost"
IDLE = "idle timeout"
STOPPING = "gateway shutting down"
#: the longest wait for the provider to answer the gateway's close
CLOSE_WAIT_S = 5.0


class Ending:
    """How a session ended: the close ``code`` and ``reason``, ``by`` whom (``client``, ``upstream`` or
    ``gateway``), and ``error`` (for the log) when it did not end cleanly."""

    __slots__ = ("code", "reason", "by", "error")

    def __init__(self, code: int, reason: str, by: str, error: str | None = None) -> None:
        self.code = code
        self.reason = reason
        self.by = by
        self.error = error


class Traffic:
    """Messages and bytes each way: ``in`` from the client to the provider, ``out`` from the provider."""

    __slots__ = ("messages_in", "bytes_in", "messages_out", "bytes_out")

    def __init__(self) -> None:
        self.messages_in = self.bytes_in = self.messages_out = self.bytes_out = 0


def frame_size(frame: str | bytes) -> int:
    """The bytes a frame carries (a text frame's UTF-8; ASCII, the usual JSON, costs no encoding)."""
    if isinstance(frame, bytes):
        return len(frame)
    return len(frame) if frame.isascii() else len(frame.encode())


class Relay:
    """Relays ``client`` and ``upstream`` (an aiohttp client WebSocket) until either ends; ``stopping`` is set when
    the worker stops."""

    __slots__ = ("client", "upstream", "max_bytes", "idle_s", "stopping", "usage", "traffic", "budget", "decided",
                 "_last", "_loop")

    def __init__(self, client: ClientSocket, upstream: aiohttp.ClientWebSocketResponse, max_bytes: int,
                 idle_s: float, stopping: asyncio.Event, usage: SessionUsage, traffic: Traffic,
                 budget: BudgetWatch | None = None) -> None:
        self.client = client
        self.upstream = upstream
        self.max_bytes = max_bytes
        self.idle_s = idle_s
        self.stopping = stopping
        self.usage = usage
        self.traffic = traffic
        #: the session's budgets, checked after each response that reports usage (None: none apply)
        self.budget = budget
        #: the ending the gateway chose before its pumps noticed (the stop)
        self.decided: Ending | None = None
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()

    async def run(self) -> Ending:
        tasks = [asyncio.ensure_future(self._watch()), asyncio.ensure_future(self._down()),
                 asyncio.ensure_future(self._up())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        ending = self.decided or first_ending(tasks)
        await self._close(ending)
        return ending

    async def _up(self) -> Ending:
        """Client to provider."""
        client, upstream, traffic, limit = self.client, self.upstream, self.traffic, self.max_bytes
        while True:
            frame = await client_message(client, traffic, limit)
            if isinstance(frame, Ending):
                return frame
            self._last = self._loop.time()
            try:
                if isinstance(frame, str):
                    await upstream.send_str(frame)
                else:
                    await upstream.send_bytes(frame)
            except (ConnectionError, aiohttp.ClientError, RuntimeError) as exc:
                return Ending(1011, LOST, "upstream", f"{LOST}: sending failed ({exc.__class__.__name__})")

    async def _down(self) -> Ending:
        """Provider to client."""
        client, upstream, traffic, usage = self.client, self.upstream, self.traffic, self.usage
        text, binary = aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY
        while True:
            message = await upstream.receive()
            kind = message.type
            if kind is text or kind is binary:
                frame = message.data
            else:
                return self._upstream_ended(message)
            self._last = self._loop.time()
            traffic.messages_out += 1
            traffic.bytes_out += frame_size(frame)
            counted = usage.read(frame)
            try:
                await client.send(frame)
            except ConnectionError:
                return Ending(client.close_code or 1006, "", "client")
            if counted and self.budget is not None:
                why = await self.budget.spent(usage)
                if why is not None:
                    with contextlib.suppress(ConnectionError):
                        await client.send(self.budget.error_event(why))
                    return Ending(BUDGET_CLOSE_CODE, BUDGET_CLOSE_REASON, "gateway", why)

    def _upstream_ended(self, message: Any) -> Ending:
        kind = message.type
        if kind == aiohttp.WSMsgType.CLOSE:
            code = message.data if isinstance(message.data, int) else 1005
            return Ending(sendable(code), message.extra or "", "upstream")
        error = message.data if kind == aiohttp.WSMsgType.ERROR else None
        if isinstance(error, aiohttp.WebSocketError) and error.code == 1009:
            reason = f"message larger than {self.max_bytes} bytes"
            return Ending(1009, reason, "gateway", f"the provider sent a {reason}")
        detail = f" ({error.__class__.__name__})" if error is not None else ""
        return Ending(1011, LOST, "upstream", f"{LOST}: closed without a close frame{detail}")

    async def _watch(self) -> Ending:
        """The idle timeout and the worker's stop."""
        while True:
            remaining = self._last + self.idle_s - self._loop.time()
            if remaining <= 0:
                return Ending(1001, IDLE, "gateway")
            if await wait_event(self.stopping, remaining):
                # at once, from here: the server may drop upgraded connections soon after its stop signal (and the
                # client's leaving, which a pump may see first, is this ending's doing)
                self.decided = Ending(1001, STOPPING, "gateway")
                await self.client.close(1001, STOPPING)
                return self.decided

    async def _close(self, ending: Ending) -> None:
        """Close both sides as ``ending`` says (the client's close first: it is the one waiting)."""
        await self.client.close(ending.code, ending.reason)
        upstream = self.upstream
        if not upstream.closed:
            code = sendable(ending.code) if ending.by == "client" else 1000
            try:
                await within(upstream.close(code=code), CLOSE_WAIT_S)
            except (TimeoutError, ConnectionError, aiohttp.ClientError, RuntimeError):
                pass


async def client_message(client: ClientSocket, traffic: Traffic, limit: int) -> str | bytes | Ending:
    """The client's next message, counted in ``traffic``; or how the session ends: the client closed, or sent a
    message over ``limit`` bytes (1009)."""
    frame = await client.receive()
    if isinstance(frame, int):
        return Ending(frame, "", "client")
    size = frame_size(frame)
    if size > limit:
        reason = f"message larger than {limit} bytes"
        return Ending(1009, reason, "gateway", f"the client sent a {reason}")
    traffic.messages_in += 1
    traffic.bytes_in += size
    return frame


def first_ending(tasks: Sequence[asyncio.Future[Ending]]) -> Ending:
    """The ending of the first task (in the list's order) that finished; a bug in a pump ends the session 1011."""
    for task in tasks:
        if task.done() and not task.cancelled():
            error = task.exception()
            if error is None:
                return task.result()
            return Ending(1011, "gateway error", "gateway", f"relay failed: {error.__class__.__name__}: {error}")
    return Ending(1011, "gateway error", "gateway", "relay ended without an outcome")
