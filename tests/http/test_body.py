"""Request bodies: a compressed body (``Content-Encoding: gzip`` or ``deflate``) is read as its JSON, within the same
size limit as a plain one; an encoding the gateway does not read is a 415 naming ``content-encoding``; a body that is
not what its encoding says is a 400."""

from __future__ import annotations

import gzip
import zlib

import pytest

from gateway.http.body import read_request_body, refuse_encoded
from gateway.http.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType

JSON = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"hello " * 200 + b'"}]}'


def receiver(*chunks: bytes):
    messages = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
                for i, chunk in enumerate(chunks)]

    async def receive() -> dict:
        return messages.pop(0)

    return receive


async def read(body: bytes, encoding: str | None, limit: int = 1 << 20, split: bool = False) -> bytes:
    headers = [(b"content-type", b"application/json")]
    if encoding is not None:
        headers.append((b"content-encoding", encoding.encode()))
    chunks = (body[: len(body) // 2], body[len(body) // 2:]) if split else (body,)
    return await read_request_body({"headers": headers}, receiver(*chunks), limit)


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def gzipped(data: bytes) -> bytes:
    """gzip with a fixed header time: the same bytes in every test process (test ids must not differ)."""
    return gzip.compress(data, mtime=0)


@pytest.mark.parametrize("encoding, body", [
    ("gzip", gzipped(JSON)), ("x-gzip", gzipped(JSON)), ("GZip", gzipped(JSON)),
    ("deflate", zlib.compress(JSON)), ("deflate", raw_deflate(JSON)), ("identity", JSON), (None, JSON),
], ids=["gzip", "x-gzip", "GZip", "deflate-zlib", "deflate-raw", "identity", "none"])
async def test_a_compressed_body_reads_as_its_json(encoding, body):
    assert await read(body, encoding) == JSON
    assert await read(body, encoding, split=True) == JSON  # in several ASGI messages too


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, br", "compress"])
async def test_an_encoding_not_read_is_a_415_naming_the_header(encoding):
    with pytest.raises(UnsupportedMediaType) as caught:
        await read(b"\x00\x01", encoding)
    assert caught.value.status == 415 and caught.value.param == "content-encoding"
    assert encoding in caught.value.message


@pytest.mark.parametrize("encoding, body", [
    ("gzip", JSON), ("gzip", gzipped(JSON)[:-20]), ("deflate", b"not deflate at all"),
    ("deflate", zlib.compress(JSON)[:30]),
], ids=["gzip-plain-json", "gzip-cut-short", "deflate-not-deflate", "deflate-cut-short"])
async def test_a_body_that_is_not_its_encoding_is_a_400(encoding, body):
    with pytest.raises(InvalidRequest) as caught:
        await read(body, encoding)
    assert caught.value.status == 400 and caught.value.param == "content-encoding"


async def test_a_body_that_inflates_past_the_limit_is_a_413_and_stops_there():
    bomb = gzipped(b"{" + b" " * 20_000_000 + b"}")  # 20 MB of JSON in ~20 KB
    assert len(bomb) < 50_000
    with pytest.raises(PayloadTooLarge) as caught:
        await read(bomb, "gzip", limit=1_000_000)
    assert "decompressed" in caught.value.message
    assert await read(gzipped(JSON), "gzip", limit=len(JSON)) == JSON  # exactly the limit is fine


@pytest.mark.parametrize("encoding, refused", [("gzip", True), ("br", True), ("identity", False), (None, False)])
def test_multipart_bodies_are_read_as_sent_and_any_encoding_is_a_415(encoding, refused):
    if not refused:
        refuse_encoded(encoding, "multipart forms")
        return
    with pytest.raises(UnsupportedMediaType) as caught:
        refuse_encoded(encoding, "multipart forms")
    assert caught.value.param == "content-encoding" and "multipart forms" in caught.value.message
