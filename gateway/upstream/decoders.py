"""Content decoders for the lean exchange's answers: gzip, deflate and br, each inflating a bounded piece at a time.

An answer's ``Content-Encoding`` (RFC 9110 section 8.4) names its coding: ``gzip`` (RFC 1952), ``deflate`` (the
zlib format of RFC 1950; some servers send raw RFC 1951 data under that name, told apart by the first byte's
compression-method nibble, 8 for zlib) or ``br`` (RFC 7932, PyPI ``Brotli``, an aiohttp dependency for it). Other
codings and ``identity`` are passed on as they came (as aiohttp does).

A decoder never inflates more than ``PIECE`` bytes in one call: input it could not finish is kept and inflated by
the next ``more()``, so a small compressed read cannot become a gigabyte at once (a "gzip bomb"), and the
caller's bound (GATEWAY_MAX_UPSTREAM_BODY_BYTES on a whole-body read) is counted piece by piece. A body that
ends before its compressed data does (framed right, but cut where it was compressed) does not decode: a truncated
answer is not passed on as a whole one (aiohttp refuses it for deflate only). zlib's
``decompress(data, max_length)`` keeps the rest in ``unconsumed_tail``; Brotli's ``process(data,
output_buffer_limit=...)`` keeps it inside and wants empty input until ``can_accept_more_data()``.
"""

from __future__ import annotations

import zlib
from typing import Protocol

try:
    import brotli  # type: ignore[import-untyped, import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - installed with the gateway
    brotli = None

#: what the exchange's requests accept (``Accept-Encoding``): the codings decoded here
ACCEPT_ENCODING = "gzip, deflate, br" if brotli is not None else "gzip, deflate"
#: the most one decode call inflates
PIECE = 256 * 1024
#: why a body whose compressed data stops before its end does not decode
_CUT = "the compressed data stops before its end"


class DecodeFailed(ValueError):
    """The body does not decode in its declared coding."""


class Decoder(Protocol):
    def feed(self, data: bytes) -> bytes:
        """Inflate ``data`` (at most ``PIECE`` bytes out; the rest waits in ``pending``)."""

    @property
    def pending(self) -> bool:
        """Input is left over: call ``more`` before feeding again."""

    def more(self) -> bytes:
        """Inflate the left-over input (at most ``PIECE`` bytes)."""

    def flush(self) -> bytes:
        """What is left once the body ended."""


class _Zlib:
    __slots__ = ("_inflate", "_raw_fallback", "_started")

    def __init__(self, wbits: int, raw_fallback: bool) -> None:
        self._inflate = zlib.decompressobj(wbits)
        self._raw_fallback = raw_fallback
        self._started = False

    def feed(self, data: bytes) -> bytes:
        if not self._started and data:
            self._started = True
            if self._raw_fallback and (data[0] & 0x0F) != 8:  # not a zlib header: raw deflate
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            return self._inflate.decompress(data, PIECE)
        except zlib.error as exc:
            raise DecodeFailed(str(exc)) from None

    @property
    def pending(self) -> bool:
        return bool(self._inflate.unconsumed_tail)

    def more(self) -> bytes:
        return self.feed(self._inflate.unconsumed_tail)

    def flush(self) -> bytes:
        try:
            out = self._inflate.flush(PIECE)
        except zlib.error as exc:
            raise DecodeFailed(str(exc)) from None
        if self._started and not self._inflate.eof:
            raise DecodeFailed(_CUT)
        return out


class _Brotli:
    __slots__ = ("_process", "_ready", "_started")

    def __init__(self) -> None:
        self._process = brotli.Decompressor()
        self._ready = self._process.can_accept_more_data
        self._started = False

    def feed(self, data: bytes) -> bytes:
        self._started = self._started or bool(data)
        try:
            return self._process.process(data, output_buffer_limit=PIECE)
        except brotli.error as exc:
            raise DecodeFailed(str(exc)) from None

    @property
    def pending(self) -> bool:
        return not self._ready()

    def more(self) -> bytes:
        return self.feed(b"")

    def flush(self) -> bytes:
        if self._started and not self._process.is_finished():
            raise DecodeFailed(_CUT)
        return b""


def decoder_for(coding: str | None) -> Decoder | None:
    """The decoder for a ``Content-Encoding`` value, or None to pass the body on as it came."""
    if not coding:
        return None
    coding = coding.strip().lower()
    if coding == "gzip" or coding == "x-gzip":
        return _Zlib(16 + zlib.MAX_WBITS, False)
    if coding == "deflate":
        return _Zlib(zlib.MAX_WBITS, True)
    if coding == "br" and brotli is not None:
        return _Brotli()
    return None
