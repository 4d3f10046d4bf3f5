"""A tiny forwarding HTTP proxy on loopback for tests: absolute-URI forwarding and CONNECT tunnels, in a thread.

Each client connection carries one request: an absolute-form request is sent on to its origin with
``Connection: close`` and the answer piped back as it arrives (streams stay streams); ``CONNECT host:port`` opens a
tunnel and pipes bytes both ways. ``seen`` records ``(method, target, proxy-authorization)`` for every request.
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlsplit


class ForwardProxy:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ForwardProxy:
        self._thread.start()
        self.run(self._listen())
        return self

    def run(self, coro, timeout: float = 10.0):
        """Run a coroutine on the proxy's loop (also handy for a test's own servers beside it)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        self.run(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
        auth = next((v.strip() for k, v in headers if k.strip().lower() == "proxy-authorization"), None)
        self.seen.append((method, target, auth))
        try:
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                return
            await self._forward(method, target, version, headers, reader, writer)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        finally:
            writer.close()

    async def _forward(self, method: str, target: str, version: str, headers: list, reader, writer) -> None:
        parts = urlsplit(target)
        length = 0
        kept = []
        for name, value in headers:
            low = name.strip().lower()
            if low in ("proxy-authorization", "proxy-connection", "connection", "keep-alive"):
                continue
            if low == "content-length":
                length = int(value.strip())
            kept.append(f"{name}:{value}")
        body = await reader.readexactly(length) if length else b""
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
        up_writer.write(request.encode("latin-1") + body)
        await up_writer.drain()
        await _pipe(up_reader, writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except RuntimeError:
            pass
