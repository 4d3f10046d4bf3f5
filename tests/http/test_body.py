"""Request bodies: a compressed body (``Content-Encoding: gzip`` or ``deflate``) is read as its JSON, within the same
size limit as a plain one; an encoding the gateway does not read is a 415 naming ``content-encoding``; a body that is
not what its encoding says is a 400; a body (JSON or multipart) that takes longer than the body timeout to arrive is
a 408, through the real gateway with a raw socket that trickles it."""

from __future__ import annotations

import contextlib
import gzip
import re
import socket
import time
import zlib

import msgspec
import pytest

from gateway.http.body import read_request_body, refuse_encoded
from gateway.http.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from tests.support.http import request
from tests.support.servers import ADMIN_KEY, start_gateway

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


# --- the body timeout --------------------------------------------------------------------------------------------


BODY_TIMEOUT_MS = 1500
CHAT = (b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "' + b"x" * 100 + b'"}]}')


@pytest.fixture(scope="module")
def slow_body_gateway(mock_server):
    server = start_gateway(env={"GATEWAY_BODY_TIMEOUT_MS": str(BODY_TIMEOUT_MS)})
    yield server
    server.stop()


def trickle(server, path: str, body: bytes, headers: dict[str, str], every: float = 0.3,
            limit: float = 30.0, silent: bool = False) -> tuple[int, bytes]:
    """Send the headers and the body's first byte, then one more byte every ``every`` seconds until the gateway
    answers (or ``limit`` seconds pass): the status and body of its answer. ``silent``: send the headers only."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=limit)
    try:
        sock.sendall(head.encode() + (b"" if silent else body[:1]))
        sock.setblocking(False)
        received, sent = b"", 0 if silent else 1
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
            except BlockingIOError:
                pass
            head_end = received.find(b"\r\n\r\n")
            if head_end >= 0:
                length = int(re.search(rb"content-length: (\d+)", received[:head_end].lower()).group(1))
                if len(received) >= head_end + 4 + length:
                    return int(received.split(b" ", 2)[1]), received[head_end + 4:head_end + 4 + length]
            if not silent and sent < len(body) - 1:  # never the last byte: the body is never complete
                with contextlib.suppress(BlockingIOError):
                    sent += sock.send(body[sent:sent + 1])
            time.sleep(every)
        raise AssertionError(f"no answer within {limit} s: {received[:200]!r}")
    finally:
        sock.close()


@pytest.mark.parametrize("silent", [False, True], ids=["trickled", "headers-then-nothing"])
def test_a_chat_body_that_does_not_arrive_in_time_is_a_408_and_nothing_goes_upstream(slow_body_gateway, mock,
                                                                                       silent):
    base = mock.scenario()
    started = time.monotonic()
    status, answer = trickle(slow_body_gateway, "/v1/chat/completions", CHAT, {
        "content-type": "application/json", "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
        "x-gateway-custom-host": base + "/v1", "authorization": "Bearer sk-t"}, silent=silent)
    assert status == 408, answer
    error = msgspec.json.decode(answer)["error"]
    assert error["code"] == "body_timeout" and error["param"] == "body" and "1.5 seconds" in error["message"]
    assert time.monotonic() - started >= BODY_TIMEOUT_MS / 1000
    assert mock.calls(base)["calls"] == 0
    # a body that arrives in time, in many pieces, is served as before
    big = CHAT.replace(b"x" * 100, b"y" * 2_000_000)
    resp = request("POST", slow_body_gateway.url + "/v1/chat/completions", big, {
        "content-type": "application/json", "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
        "x-gateway-custom-host": base + "/v1", "authorization": "Bearer sk-t"})
    assert resp.status == 200, resp.text[:300]


def _form(name: str, filename: str, content: bytes, fields: dict[str, str]) -> bytes:
    out = b"".join(f'--zz\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                   for k, v in fields.items())
    return (out + f'--zz\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n\r\n'.encode()
            + content + b"\r\n--zz--\r\n")


def test_a_trickled_upload_is_a_408_and_leaves_no_file(slow_body_gateway):
    files = f"{slow_body_gateway.url}/v1/files?limit=10000"
    before = request("GET", files, headers={"x-gateway-api-key": ADMIN_KEY}).json()["data"]
    body = _form("file", "slow.jsonl", b'{"a": 1}\n' * 20, {"purpose": "batch"})
    status, answer = trickle(slow_body_gateway, "/v1/files", body, {
        "content-type": "multipart/form-data; boundary=zz", "x-gateway-api-key": ADMIN_KEY})
    assert status == 408 and msgspec.json.decode(answer)["error"]["code"] == "body_timeout", answer
    after = request("GET", files, headers={"x-gateway-api-key": ADMIN_KEY}).json()["data"]
    assert [f["id"] for f in after] == [f["id"] for f in before]


def test_a_trickled_audio_form_is_a_408_and_nothing_goes_upstream(slow_body_gateway, mock):
    base = mock.scenario()
    body = _form("file", "a.wav", b"RIFF" + b"\0" * 200, {"model": "whisper-1"})
    status, answer = trickle(slow_body_gateway, "/v1/audio/transcriptions", body, {
        "content-type": "multipart/form-data; boundary=zz", "x-gateway-api-key": ADMIN_KEY,
        "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1", "authorization": "Bearer sk-t"})
    assert status == 408 and msgspec.json.decode(answer)["error"]["code"] == "body_timeout", answer
    assert mock.calls(base)["calls"] == 0
