"""The lean exchange's content decoding (``gateway.upstream.decoders``) through ``LeanTransport``: every coding it
asks for read back decoded (zlib and raw deflate both under ``deflate``), codings it does not know passed on as
they came, a body that does not decode (or stops short of its end) a 502 in words, and a gzip bomb stopped at
GATEWAY_MAX_UPSTREAM_BODY_BYTES (502 ``upstream_answer_too_large``) while inflating no more than a bounded piece
per read."""

from __future__ import annotations

import zlib

import brotli
import pytest

from gateway.http.errors import GatewayError
from gateway.upstream.decoders import PIECE
from gateway.upstream.request import UpstreamRequest
from tests.support.hostile import gzip_bomb
from tests.support.lean import ScriptedConnection, ScriptedUpstream, answer, fetch, lean_transport

TEXT = b'{"choices":[{"message":{"content":"' + b"lorem ipsum dolor sit amet " * 400 + b'"}}]}'


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def serving(body: bytes, *lines: str) -> ScriptedUpstream:
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(answer(200, body, *lines))

    return ScriptedUpstream(serve)


def chunked(body: bytes, *lines: str, size: int = 100) -> ScriptedUpstream:
    """Serves ``body`` in chunks of ``size`` bytes."""
    framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size))

    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            head = "\r\n".join(["HTTP/1.1 200 OK", "transfer-encoding: chunked", *lines]) + "\r\n\r\n"
            await conn.send(head.encode() + framed + b"0\r\n\r\n")

    return ScriptedUpstream(serve)


@pytest.mark.parametrize(("coding", "encoded"), [
    ("gzip", _gzip(TEXT)), ("x-gzip", _gzip(TEXT)), ("GZIP", _gzip(TEXT)),
    ("deflate", zlib.compress(TEXT)), ("deflate", _raw_deflate(TEXT)), ("br", brotli.compress(TEXT)),
], ids=["gzip", "x-gzip", "upper-case", "deflate-zlib", "deflate-raw", "br"])
async def test_every_coding_asked_for_reads_decoded(coding, encoded):
    async with serving(encoded, f"content-encoding: {coding}") as upstream, lean_transport() as transport:
        status, headers, body = await fetch(transport, upstream.url)
        assert (status, body) == (200, TEXT)
        assert headers["content-length"] == str(len(encoded))  # the headers are the upstream's, as sent
    async with chunked(encoded, f"content-encoding: {coding}", size=7) as upstream, lean_transport() as transport:
        assert (await fetch(transport, upstream.url))[2] == TEXT


@pytest.mark.parametrize("coding", ["identity", "zstd", ""])
async def test_a_coding_it_does_not_decode_is_passed_on_as_it_came(coding):
    async with serving(b"\x28\xb5\x2f\xfd opaque", f"content-encoding: {coding}") as upstream, \
            lean_transport() as transport:
        assert (await fetch(transport, upstream.url))[2] == b"\x28\xb5\x2f\xfd opaque"


@pytest.mark.parametrize(("coding", "encoded"), [
    ("gzip", b"\x1f\x8b\x08\x00 this is not gzip at all"),
    ("deflate", b"\x78\x9c not deflate"),
    ("br", b"\xff\xff\xff\xff not brotli"),
], ids=["gzip", "deflate", "br"])
async def test_a_body_that_does_not_decode_is_a_502_in_words(coding, encoded):
    async with serving(encoded, f"content-encoding: {coding}") as upstream, lean_transport() as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url)
    assert error.value.status == 502
    assert "does not decode in its Content-Encoding" in error.value.message


@pytest.mark.parametrize(("coding", "encoded"), [
    ("gzip", _gzip(TEXT)[:-20]), ("deflate", zlib.compress(TEXT)[:-20]), ("br", brotli.compress(TEXT)[:-5]),
], ids=["gzip", "deflate", "br"])
async def test_a_compressed_body_that_stops_short_of_its_end_is_a_502(coding, encoded):
    """Framed right (Content-Length says what came) but the compressed data is cut: not the whole answer."""
    async with serving(encoded, f"content-encoding: {coding}") as upstream, lean_transport() as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url)
    assert error.value.status == 502
    assert "does not decode in its Content-Encoding" in error.value.message


async def test_a_gzip_bomb_is_stopped_at_the_body_bound_a_bounded_piece_at_a_time():
    bomb = gzip_bomb(256 << 20)
    async with serving(bomb, "content-encoding: gzip") as upstream, \
            lean_transport(max_upstream_body_bytes=4 << 20) as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url)
        assert error.value.status == 502 and error.value.code == "upstream_answer_too_large"
        assert "larger than 4194304 bytes" in error.value.message

        resp = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"), stream=True)
        pieces = [await resp.read_some() for _ in range(50)]
        resp.close()
    assert all(0 < len(piece) <= PIECE for piece in pieces) and set(b"".join(pieces)) == {0}
    assert upstream.connections == 2  # the bomb's connection was dropped, not pooled
