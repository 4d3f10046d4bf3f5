"""A media form is read as it streams: fields kept (repeats as arrays), files spooled, limits enforced."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from gateway.http.errors import InvalidRequest, PayloadTooLarge
from gateway.pipeline.media_form import receive_form


def body(*parts: tuple[str, str | None, bytes]) -> bytes:
    out = b""
    for name, filename, content in parts:
        extra = f'; filename="{filename}"' if filename else ""
        out += f'--zz\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode() + content + b"\r\n"
    return out + b"--zz--\r\n"


def read(data: bytes, limit: int = 1 << 20, piece: int = 5, hashed: bool = False):
    scope = {"headers": [(b"content-type", b"multipart/form-data; boundary=zz")]}
    messages = [{"type": "http.request", "body": data[i:i + piece], "more_body": i + piece < len(data)}
                for i in range(0, len(data), piece)]

    async def receive():
        return messages.pop(0)

    return asyncio.run(receive_form(scope, receive, limit, None, hashed))


def test_fields_files_and_repeats():
    form = read(body(("model", None, b"gpt-image-1"), ("image[]", "a.png", b"A" * 100),
                     ("image[]", "b.png", b"B" * 50), ("tags", None, b"x"), ("tags", None, b"y")))
    try:
        assert msgspec.json.decode(form.body()) == {"model": "gpt-image-1", "tags": ["x", "y"]}
        assert [(p.name, p.filename, p.size) for p in form.files] == [
            ("image[]", "a.png", 100), ("image[]", "b.png", 50)]
        form.files[0].file.seek(0)
        assert form.files[0].file.read() == b"A" * 100
    finally:
        form.close()


def test_files_are_hashed_as_they_are_spooled_only_when_asked():
    import hashlib

    # a file larger than one spool flush, arriving in small pieces
    data = bytes(range(256)) * 6000
    parts = (("model", None, b"whisper-1"), ("file", "a.wav", data), ("mask", "m.png", b"M"))
    form = read(body(*parts), limit=4 << 20, piece=65536, hashed=True)
    try:
        assert form.identity() == [
            ["file", "a.wav", "application/octet-stream", len(data), hashlib.blake2b(data, digest_size=20).hexdigest()],
            ["mask", "m.png", "application/octet-stream", 1, hashlib.blake2b(b"M", digest_size=20).hexdigest()]]
    finally:
        form.close()
    plain = read(body(*parts), limit=4 << 20, piece=65536)
    try:
        assert plain.identity() is None and all(p.hasher is None for p in plain.files)
    finally:
        plain.close()


def test_files_over_the_limit_are_a_413_and_bad_bodies_a_400():
    with pytest.raises(PayloadTooLarge):
        read(body(("file", "a.wav", b"x" * 600), ("file2", "b.wav", b"x" * 600)), limit=1000)
    with pytest.raises(InvalidRequest):
        read(b"--zz\r\nnot a header line")


def test_a_payload_sends_the_whole_files_however_often_it_is_written():
    form = read(body(("model", None, b"whisper-1"), ("file", "a.wav", b"RIFF" + b"w" * 300_000)))

    class Sink:
        def __init__(self) -> None:
            self.data = bytearray()

        async def write(self, chunk: bytes) -> None:
            self.data += chunk

    async def written(payload) -> bytes:
        sink = Sink()
        await payload.write(sink)
        return bytes(sink.data)

    try:
        payload = form.payload({"model": "whisper-1", "language": "fr"})
        first, again = asyncio.run(written(payload)), asyncio.run(written(payload))
        assert first == again and first.count(b"w" * 300_000) == 1
        assert b'name="language"\r\n\r\nfr' in first and b'filename="a.wav"' in first
    finally:
        form.close()
