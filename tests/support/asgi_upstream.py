"""A tiny raw-ASGI upstream for tests that need a real server (served by Granian in a subprocess): JSON, a chunked
SSE stream, gzip/deflate/br bodies, a ``Connection: close`` answer, and each answer names the client port it came
from (``x-peer-port``) so a test sees whether its connections were reused.

Paths: ``/json``, ``/sse?events=N``, ``/gzip``, ``/deflate``, ``/br``, ``/close``, ``/echo`` (the request's headers
back as JSON).
"""

from __future__ import annotations

import zlib
from typing import Any

import brotli
import msgspec

#: the decoded body of ``/gzip``, ``/deflate`` and ``/br``
TEXT = b"the quick brown fox jumps over the lazy dog " * 200
JSON = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "hi"}}]}


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


#: the raw bodies of ``/gzip``, ``/deflate`` and ``/br`` (path: coding, encoded ``TEXT``)
ENCODED = {"/gzip": ("gzip", _gzip(TEXT)), "/deflate": ("deflate", zlib.compress(TEXT)),
            "/br": ("br", brotli.compress(TEXT))}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    path = scope["path"]
    peer = [(b"x-peer-port", str(scope["client"][1]).encode())]
    if path == "/sse":
        events = int(scope["query_string"].decode().partition("=")[2] or 3)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), *peer]})
        for i in range(events):
            await send({"type": "http.response.body", "body": b"data: {\"n\": %d}\n\n" % i, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        return
    headers = [(b"content-type", b"application/json"), *peer]
    if path in ENCODED:
        coding, body = ENCODED[path]
        headers = [(b"content-type", b"text/plain"), (b"content-encoding", coding.encode()), *peer]
    elif path == "/close":
        headers.append((b"connection", b"close"))
        body = msgspec.json.encode(JSON)
    elif path == "/echo":
        body = msgspec.json.encode({name.decode(): value.decode() for name, value in scope["headers"]})
    else:
        body = msgspec.json.encode(JSON)
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
