"""Test kit for the lean upstream exchange (``gateway.upstream.lean``): a started ``LeanTransport`` with loopback
upstreams allowed, one-call fetches, and a scripted raw upstream.

``ScriptedUpstream(serve)`` is an asyncio server on 127.0.0.1 in the test's own event loop; each connection is
served by ``serve(conn)``, a coroutine the test writes byte for byte (heads split across reads, cuts, resets,
silences). ``connections`` counts the connections it accepted and ``requests`` keeps each request head it read, so a
test sees whether a pooled connection was reused.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from gateway.http.errors import GatewayError
from gateway.settings import Settings
from gateway.upstream.lean import LeanTransport
from gateway.upstream.request import UpstreamRequest

_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")
#: the loopback names a test upstream listens on, allowed past the SSRF guard
LOOPBACK = ("127.0.0.1", "localhost")


def lean_settings(**overrides: Any) -> Settings:
    """Settings for a lean transport in a test: loopback upstreams allowed, ``overrides`` over them."""
    return Settings(**{"allow_private_hosts": LOOPBACK, **overrides})


@asynccontextmanager
async def lean_transport(settings: Settings | None = None, ssl_context: ssl.SSLContext | None = None,
                         **overrides: Any) -> AsyncIterator[LeanTransport]:
    """A started ``LeanTransport`` (closed when the block ends); ``overrides`` are ``Settings`` fields,
    ``ssl_context`` the client's TLS context (the system's trust store when None)."""
    transport = LeanTransport(settings or lean_settings(**overrides), ssl_context=ssl_context)
    await transport.start()
    try:
        yield transport
    finally:
        await transport.close()


async def fetch(transport: LeanTransport, url: str, body: bytes = b"{}", headers: dict[str, str] | None = None,
                method: str = "POST") -> tuple[int, Mapping[str, str], bytes]:
    """One request read whole: status, headers and body (the connection released to the pool)."""
    resp = await transport.open(UpstreamRequest(url, headers or {"content-type": "application/json"}, body, method))
    try:
        data = await resp.read_body()
    except BaseException:
        resp.close()
        raise
    resp.release()
    return resp.status, resp.headers, data


class ScriptedConnection:
    """One connection to a ``ScriptedUpstream``: the request reads and raw writes a test scripts."""

    def __init__(self, upstream: ScriptedUpstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 index: int) -> None:
        self.upstream = upstream
        self.reader = reader
        self.writer = writer
        #: 1 for the upstream's first connection, 2 for its second...
        self.index = index

    async def request(self) -> bytes | None:
        """The next request's head (its body read and dropped); None when the client closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = _LENGTH.search(head)
        if length:
            await self.reader.readexactly(int(length.group(1)))
        self.upstream.requests.append(head)
        return head

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def trickle(self, data: bytes) -> None:
        """Write ``data`` a byte at a time, each its own segment (a head split across many reads)."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(data)):
            self.writer.write(data[i:i + 1])
            await self.writer.drain()
            await asyncio.sleep(0)

    async def closed_by_client(self) -> bool:
        """Wait for the client to close the connection (True) or send more (False)."""
        try:
            return await self.reader.read(1) == b""
        except ConnectionError:
            return True

    def reset(self) -> None:
        """Reset the connection (an RST, not an orderly close)."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    def close(self) -> None:
        self.writer.close()


Serve = Callable[[ScriptedConnection], Awaitable[None]]


class ScriptedUpstream:
    """``async with ScriptedUpstream(serve) as upstream:`` serves on ``upstream.url`` until the block ends."""

    def __init__(self, serve: Serve, tls: ssl.SSLContext | None = None) -> None:
        self.serve = serve
        #: the server side's TLS context (``url`` is then https)
        self.tls = tls
        self.connections = 0
        #: each request head read (by ``ScriptedConnection.request``), in order
        self.requests: list[bytes] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        for writer in self._writers:
            writer.transport.abort()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            await self.serve(ScriptedConnection(self, reader, writer, self.connections))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # cancelled: the upstream is closing (asyncio's server logs a handler task that ends cancelled)
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()


async def refusal(serve: Callable[[ScriptedConnection], Awaitable[None]], **overrides: Any) -> GatewayError:
    """The error one request to the scripted upstream ``serve`` ends with (``overrides``: ``Settings`` fields): for
    upstreams that answer wrong. Fails the test when the request succeeds."""
    async with ScriptedUpstream(serve) as upstream, lean_transport(**overrides) as transport:
        try:
            await fetch(transport, upstream.url)
        except GatewayError as error:
            return error
    raise AssertionError(f"a request to the scripted upstream {serve.__name__} succeeded")


def answer(status: int, body: bytes, *lines: str, reason: str = "OK") -> bytes:
    """A raw HTTP/1.1 answer framed by Content-Length, ``lines`` extra header lines."""
    head = [f"HTTP/1.1 {status} {reason}", f"content-length: {len(body)}", *lines]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
