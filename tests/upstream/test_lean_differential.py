"""A differential test of the lean exchange: random answers (a status, a few headers, CRLF or bare-LF heads, a body
framed by Content-Length, chunked with random chunk sizes, extensions and trailers, or by the connection's close,
optionally gzip, written in random pieces) served by a raw asyncio server and read by ``LeanTransport`` (with each
request-head twin) and by aiohttp's ``ClientSession``: the same status, the same values for the header names sent,
the same body, and the same request head from both twins."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway._speedups import NO_EXTENSIONS
from gateway.upstream import head as pure_head
from gateway.upstream import head_in_use, lean
from gateway.upstream.lean import LeanTransport
from gateway.upstream.request import UpstreamRequest
from tests.support.lean import ScriptedConnection, ScriptedUpstream, lean_settings

T = TypeVar("T")
STATUSES = st.one_of(st.sampled_from([200, 201, 204, 304, 400, 401, 404, 422, 429, 500, 502, 503]),
                     st.integers(200, 599))
#: statuses whose answers have no body, whatever their head says
BODILESS = (204, 304)
NAMES = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_"), min_size=1, max_size=12).map(
    lambda n: "x-" + n)
VALUES = st.text(st.characters(min_codepoint=0x20, exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=40)


@dataclass
class Served:
    """The answer the server writes next (``pieces``, each its own write) and the request heads it read."""

    pieces: list[bytes] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)
    #: the answer has no framing: the server closes the connection after it
    close: bool = False


@st.composite
def answers(draw: st.DrawFn) -> tuple[int, dict[str, str], bytes, list[bytes], bool]:
    """(status, headers sent, the decoded body, the raw answer in the pieces it is written in, whether it ends at
    the connection's close)."""
    status = draw(STATUSES)
    headers = draw(st.dictionaries(NAMES, VALUES, max_size=5))
    body = draw(st.binary(max_size=3000) | st.text(max_size=500).map(str.encode))
    lines = [f"HTTP/1.1 {status} Whatever", *(f"{name}: {value}" for name, value in headers.items())]
    eol = draw(st.sampled_from(["\r\n", "\n"]))  # bare LF heads: read leniently by both
    if status in BODILESS:
        raw = (eol.join(lines) + eol + eol).encode()
        return status, headers, b"", [raw], False
    payload = body
    if draw(st.booleans()):
        packer = zlib.compressobj(draw(st.integers(1, 9)), zlib.DEFLATED, 31)
        payload = packer.compress(body) + packer.flush()
        lines.append("content-encoding: gzip")
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    if framing == "length":
        lines.append(f"content-length: {len(payload)}")
        framed = payload
    elif framing == "close":
        framed = payload
    else:
        lines.append("transfer-encoding: chunked")
        cuts = sorted(draw(st.lists(st.integers(0, len(payload)), max_size=8)))
        bounds = [0, *cuts, len(payload)]
        chunks = [payload[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        extension = draw(st.sampled_from([b"", b";name=value", b';a="quoted; value";b']))
        trailers = draw(st.sampled_from([b"", b"x-checksum: 1\r\n", b"x-a: 1\r\nx-b: 2\r\n"]))
        framed = b"".join(b"%x%s\r\n%s\r\n" % (len(chunk), extension, chunk) for chunk in chunks)
        framed += b"0%s\r\n%s\r\n" % (extension, trailers)
    raw = (eol.join(lines) + eol + eol).encode() + framed
    splits = sorted(draw(st.lists(st.integers(1, max(1, len(raw) - 1)), max_size=6)))
    bounds = [0, *splits, len(raw)]
    pieces = [raw[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    return status, headers, body, pieces, framing == "close"


class Rig:
    """The server and both clients on one event loop of the test's own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.served = Served()
        self.upstream = ScriptedUpstream(self._serve)
        self.transport = LeanTransport(lean_settings(upstream_read_timeout_ms=10_000))
        self.session: aiohttp.ClientSession | None = None

    async def _serve(self, conn: ScriptedConnection) -> None:
        while head := await conn.request():
            self.served.heads.append(head)
            for piece in self.served.pieces:
                await conn.send(piece)
            if self.served.close:
                return

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    async def start(self) -> None:
        await self.upstream.__aenter__()
        await self.transport.start()
        self.session = aiohttp.ClientSession()

    async def close(self) -> None:
        assert self.session is not None
        await self.session.close()
        await self.transport.close()
        await self.upstream.__aexit__(None, None, None)

    async def lean(self) -> tuple[int, dict[str, str | None], bytes]:
        resp = await self.transport.open(UpstreamRequest(self.upstream.url + "/v1/x", {"x-sent": "1"}, b"{}"))
        body = await resp.read_body()
        resp.release()
        return resp.status, resp.headers, body  # type: ignore[return-value]

    async def aiohttp(self) -> tuple[int, dict[str, str | None], bytes]:
        assert self.session is not None
        async with self.session.post(self.upstream.url + "/v1/x", data=b"{}", headers={"x-sent": "1"}) as resp:
            return resp.status, resp.headers, await resp.read()  # type: ignore[return-value]


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    rig = Rig()
    rig.run(rig.start())
    yield rig
    rig.run(rig.close())
    rig.loop.close()


def test_the_compiled_head_twin_is_the_one_in_use():
    assert head_in_use.IMPLEMENTATION == ("pure" if NO_EXTENSIONS else "compiled")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers())
def test_lean_and_aiohttp_read_the_same_answer(rig, answer):
    status, headers, body, pieces, close = answer
    rig.served.pieces = pieces
    rig.served.close = close
    rig.served.heads.clear()
    results = []
    for writer in (head_in_use.request_head, pure_head.request_head):
        lean.request_head = writer  # the kernel in use, then the pure twin
        try:
            results.append(rig.run(rig.lean()))
        finally:
            lean.request_head = head_in_use.request_head
    results.append(rig.run(rig.aiohttp()))
    assert rig.served.heads[0] == rig.served.heads[1]  # both twins wrote the same request
    for got_status, got_headers, got_body in results:
        assert got_status == status
        assert got_body == body
        for name, value in headers.items():
            assert got_headers.get(name) == value.strip(" "), name  # whitespace around a value is not part of it
