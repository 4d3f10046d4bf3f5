"""Low-noise HTTP/1.1 clients for the benchmarks: a keep-alive socket for latency and a multi-process load generator.

Both send prebuilt request bytes and only frame the answer (status, ``content-length`` or chunked), so the client's
own cost per request is small and the same for every target.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time
from urllib.parse import urlsplit

_HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER = range(5)


def build_request(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    """The exact bytes of a keep-alive ``POST url`` with ``body``."""
    parts = urlsplit(url)
    lines = [f"POST {parts.path or '/'} HTTP/1.1", f"host: {parts.hostname}:{parts.port}",
             f"content-length: {len(body)}", "connection: keep-alive"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ResponseFramer:
    """Incremental framing of HTTP/1.1 responses; ``feed`` returns the statuses of the responses it completed."""

    __slots__ = ("buf", "state", "remaining", "status", "body_seen")

    def __init__(self) -> None:
        self.buf = b""
        self.state = _HEAD
        self.remaining = 0
        self.status = 0
        #: True once the current response has delivered body bytes (time to first byte of a stream)
        self.body_seen = False

    def feed(self, data: bytes) -> list[int]:
        buf = self.buf + data if self.buf else data
        done: list[int] = []
        pos = 0
        while True:
            state = self.state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    break
                head = buf[pos:end].lower()
                self.status = int(head[9:12])
                pos = end + 4
                self.body_seen = False
                if b"transfer-encoding: chunked" in head:
                    self.state = _CHUNK_SIZE
                else:
                    mark = head.find(b"content-length:")
                    self.remaining = int(head[mark + 15:].split(b"\r\n", 1)[0]) if mark >= 0 else 0
                    self.state = _BODY
            elif state == _BODY:
                take = min(self.remaining, len(buf) - pos)
                pos += take
                self.remaining -= take
                if take:
                    self.body_seen = True
                if self.remaining:
                    break
                done.append(self.status)
                self.state = _HEAD
            elif state == _CHUNK_SIZE:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                size = int(buf[pos:end].split(b";", 1)[0], 16)
                pos = end + 2
                if size == 0:
                    self.state = _TRAILER
                else:
                    self.remaining = size + 2  # data + CRLF
                    self.state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                take = min(self.remaining, len(buf) - pos)
                pos += take
                self.remaining -= take
                self.body_seen = True
                if self.remaining:
                    break
                self.state = _CHUNK_SIZE
            else:  # _TRAILER: trailer lines (none expected), then the empty line that ends the response
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                empty = end == pos
                pos = end + 2
                if empty:
                    done.append(self.status)
                    self.state = _HEAD
        self.buf = buf[pos:]
        return done


class Connection:
    """One persistent keep-alive connection; ``send`` times one request (nanoseconds to first body byte and end)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.sock: socket.socket | None = None

    def _open(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def send(self, request: bytes) -> tuple[int, int, int]:
        """``(status, ns to first body byte, ns to the end)`` of one request."""
        if self.sock is None:
            self.sock = self._open()
        framer = ResponseFramer()
        recv = self.sock.recv
        started = time.perf_counter_ns()
        first = 0
        self.sock.sendall(request)
        while True:
            data = recv(65536)
            if not data:
                self.close()
                raise ConnectionError(f"{self.address} closed the connection")
            done = framer.feed(data)
            if not first and framer.body_seen:
                first = time.perf_counter_ns()
            if done:
                ended = time.perf_counter_ns()
                return done[0], (first or ended) - started, ended - started

    def fetch(self, request: bytes) -> tuple[int, bytes]:
        """``(status, raw body bytes as framed on the wire)`` of one request, read whole."""
        if self.sock is None:
            self.sock = self._open()
        framer = ResponseFramer()
        received = []
        self.sock.sendall(request)
        while True:
            data = self.sock.recv(65536)
            if not data:
                self.close()
                raise ConnectionError(f"{self.address} closed the connection")
            received.append(data)
            done = framer.feed(data)
            if done:
                raw = b"".join(received)
                return done[0], raw[raw.find(b"\r\n\r\n") + 4:]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class _LoadProtocol(asyncio.Protocol):
    """One load connection: send, wait for the whole answer, send again until the time or the count is up."""

    def __init__(self, request: bytes, shared: dict) -> None:
        self.request = request
        self.shared = shared
        self.framer = ResponseFramer()
        self.transport: asyncio.Transport | None = None

    def _send(self) -> None:
        shared = self.shared
        if shared["stop"] or (shared["limit"] and shared["sent"] >= shared["limit"]):
            return
        shared["sent"] += 1
        self.transport.write(self.request)

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._send()

    def data_received(self, data: bytes) -> None:
        shared = self.shared
        for status in self.framer.feed(data):
            shared["requests"] += 1
            if not 200 <= status < 300:
                shared["errors"] += 1
            if shared["limit"] and shared["requests"] >= shared["limit"]:
                shared["stop"] = True
            self._send()

    def connection_lost(self, exc) -> None:
        if not self.shared["stop"]:
            self.shared["errors"] += 1


async def _load(address: tuple[str, int], request: bytes, conns: int, duration: float, limit: int) -> dict:
    loop = asyncio.get_running_loop()
    shared = {"requests": 0, "sent": 0, "errors": 0, "stop": False, "limit": limit}
    protocols = []
    started = time.perf_counter()
    for _ in range(conns):
        _, proto = await loop.create_connection(lambda: _LoadProtocol(request, shared), *address)
        proto.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocols.append(proto)
    deadline = started + duration
    while not shared["stop"] and time.perf_counter() < deadline:  # noqa: ASYNC110 - the protocols set a flag
        await asyncio.sleep(0.02)
    shared["stop"] = True
    elapsed = time.perf_counter() - started
    for proto in protocols:
        proto.transport.close()
    return {"requests": shared["requests"], "errors": shared["errors"], "seconds": elapsed}


def _worker(args: tuple) -> dict:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(_load(*args))


def python_load(url: str, request: bytes, conns: int, duration: float, processes: int = 2,
                limit: int = 0) -> dict:
    """Keep ``conns`` connections busy for ``duration`` s (or ``limit`` answers) from ``processes`` processes."""
    parts = urlsplit(url)
    address = (parts.hostname, parts.port)
    processes = max(1, min(processes, conns))
    shares = [conns // processes + (1 if i < conns % processes else 0) for i in range(processes)]
    per_limit = [limit * s // conns for s in shares]
    per_limit[0] += limit - sum(per_limit)  # exact total
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        results = pool.map(_worker, [(address, request, s, duration, lim) for s, lim in zip(shares, per_limit)])
    seconds = max(r["seconds"] for r in results)
    total = sum(r["requests"] for r in results)
    return {"requests": total, "errors": sum(r["errors"] for r in results), "seconds": seconds,
            "rps": total / seconds if seconds else 0.0}
