"""A hostile upstream for tests: an HTTP/1.1 server on 127.0.0.1 whose every answer the test writes byte for byte
(a gzip bomb, a huge error, the request's own headers echoed back), in an event loop thread of its own.

``answer(head, body)`` returns the raw response (status line, headers, body) for one request; connections are kept
alive. ``connections`` and ``requests`` count what arrived (``heads`` keeps each request's head); ``dropped``
counts connections the gateway closed right after an answer (or while it was still being written): an answer it
refused, never returned to its pool.
"""

from __future__ import annotations

import asyncio
import re
import struct
import threading
import zlib
from collections.abc import Callable
from types import TracebackType
from typing import Self

Answer = Callable[[bytes, bytes], bytes]
_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")


def gzip_bomb(inflated: int = 1 << 30) -> bytes:
    """A gzip member of about 1 MB that inflates to ``inflated`` zero bytes (a multiple of 1 MiB): one MiB of zeros
    compressed with a full flush gives a block that stands for any further MiB, so the member is made by zlib once
    and repeated, with the real CRC and length in its trailer."""
    mib = bytes(1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = packer.compress(mib) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(mib) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(inflated >> 20):
        crc = zlib.crc32(mib, crc)
    final = packer.flush()[:-8]  # the last (empty) block; its trailer is for the two MiB packed so far
    return first + block * ((inflated >> 20) - 1) + final + struct.pack("<II", crc, inflated & 0xFFFFFFFF)


def response(status: int, body: bytes, content_type: str = "application/json", **headers: str) -> bytes:
    """A raw HTTP/1.1 response with a Content-Length (``headers`` use ``_`` for ``-``)."""
    lines = [f"HTTP/1.1 {status} X", f"content-type: {content_type}", f"content-length: {len(body)}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HostileUpstream:
    """``with HostileUpstream(answer) as upstream:`` serves on ``upstream.url`` until the block ends."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self.dropped = 0
        #: each request's head (request line and headers) as received
        self.heads: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile-upstream", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            self._closing = True
            for writer in self._writers:
                writer.close()
            serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if serving:
                await asyncio.wait(serving, timeout=5)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        answered = False
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.dropped += answered and not self._closing  # closed right after an answer
                    return
                length = _LENGTH.search(head)
                body = await reader.readexactly(int(length.group(1))) if length else b""
                self.requests += 1
                self.heads.append(head.decode("latin-1"))
                writer.write(self.answer(head, body))
                answered = True
                await writer.drain()
        except ConnectionError:  # reset while the answer was still being written, or right after it
            self.dropped += answered and not self._closing
        finally:
            self._writers.discard(writer)
            writer.close()
