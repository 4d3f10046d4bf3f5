"""Reading a request body from ASGI under the GATEWAY_MAX_BODY_BYTES limit, decompressing a compressed one.

A body sent with ``Content-Encoding: gzip`` (or ``x-gzip``) or ``deflate`` (zlib-wrapped, as RFC 9110 defines it;
a raw deflate stream is read too, as some clients send one) is decompressed before anything reads it; the limit
applies to the bytes received and again to the decompressed body (a small body that inflates past it is a 413, and
decompression stops there). ``identity`` is no encoding. Any other encoding (``br``, ``zstd``, a list of several)
is a 415 naming ``content-encoding``; a body that is not what its encoding says is a 400. Multipart bodies (files,
images and audio forms) are read as sent: any encoding there is a 415 (``refuse_encoded``).

A body must arrive within the worker's body timeout (``GATEWAY_BODY_TIMEOUT_MS``), counted from when the gateway
begins to read it: past it the request is a 408 and nothing was done with it (gateway/http/bodywatch.py).
"""

from __future__ import annotations

import asyncio
import zlib

from gateway.http.bodywatch import watch_of, watched_receive
from gateway.http.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from gateway.http.types import Receive, Scope

#: Content-Encoding -> zlib window bits of the decoder (gzip header; zlib header)
_DECODERS = {b"gzip": 16 + zlib.MAX_WBITS, b"x-gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}
#: Content-Encoding values that mean the body is as sent
_AS_SENT = (b"", b"identity")


class ClientDisconnected(Exception):
    """The client went away before its body was read."""


async def read_request_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body, decompressed; 413 as soon as it is known to exceed ``limit`` (Content-Length, bytes read or
    bytes decompressed)."""
    encoding = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise InvalidRequest("Content-Length is not an integer", param="content-length") from None
            if declared > limit:
                raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
        elif name == b"content-encoding":
            encoding = value
    body = await _read(scope, receive, limit)
    if encoding is None:
        return body
    return decoded(body, encoding, limit)


async def _read(scope: Scope, receive: Receive, limit: int) -> bytes:
    watch = watch_of(scope)
    if watch is None:
        message = await receive()
        began = 0
    else:  # watched_receive inline: no further await on the path of a body that comes with its headers
        task = asyncio.current_task()
        assert task is not None
        watch.waiting[task] = began = watch.tick
        try:
            message = await receive()
        except asyncio.CancelledError:
            if watch.claim(task):
                raise watch.timed_out() from None
            raise
        finally:
            watch.waiting.pop(task, None)
    if message["type"] == "http.disconnect":
        raise ClientDisconnected()
    body = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        return body
    parts = [body]
    size = len(body)
    while True:
        message = await watched_receive(watch, receive, began)
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def refuse_encoded(encoding: str | None, what: str) -> None:
    """415 for a body whose ``Content-Encoding`` (the header's value, or None) is not ``identity`` where bodies are
    read as sent (``what``: the multipart uploads and forms)."""
    if encoding is not None and encoding.strip().lower().encode("latin-1") not in _AS_SENT:
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported for {what}: send the body as is",
                                   param="content-encoding")


def decoded(body: bytes, encoding: bytes, limit: int) -> bytes:
    """``body`` decoded from its ``Content-Encoding``, at most ``limit`` bytes of it."""
    name = encoding.strip().lower()
    if name in _AS_SENT:
        return body
    wbits = _DECODERS.get(name)
    if wbits is None:
        shown = encoding.decode("latin-1")
        raise UnsupportedMediaType(f"Content-Encoding {shown!r} is not supported: send the body as is, or gzip or "
                                   "deflate it", param="content-encoding")
    try:
        return _inflate(body, wbits, limit)
    except zlib.error:
        if name != b"deflate":
            raise InvalidRequest(f"request body is not valid {name.decode()} data", param="content-encoding") from None
    try:  # a raw deflate stream, without the zlib header
        return _inflate(body, -zlib.MAX_WBITS, limit)
    except zlib.error:
        raise InvalidRequest("request body is not valid deflate data", param="content-encoding") from None


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(body, limit + 1)
    if len(out) > limit:
        raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes once decompressed")
    if not inflater.eof:
        raise zlib.error("truncated")
    return out
