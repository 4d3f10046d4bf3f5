"""The upstream transport interface: what sends an ``UpstreamRequest`` and what its answer offers the gateway.

Every request-path call to an upstream goes through an ``UpstreamTransport`` (by way of ``exchange.py``); the
pipeline, the file passthrough and the semantic cache's embedder never see the HTTP library beneath it. The
transports:

- ``gateway.upstream.client.UpstreamClient``: aiohttp, a keep-alive pool per upstream host, the SSRF guard and
  proxies (its answers are ``AiohttpResponse``, aiohttp's own response object with this interface added, so an
  answer costs no wrapper);
- ``gateway.upstream.mock.MockTransport``: answers from a function, without a socket, for tests.

An answer (``UpstreamResponse``) is read one of three ways: whole and bounded (``read_body``: JSON answers and error
bodies, at most GATEWAY_MAX_UPSTREAM_BODY_BYTES), piece by piece as it arrives (``read_some`` until the first events
of a stream, ``chunks`` for a relayed stream or raw media), and is then ``release``d (back to the pool) or
``close``d (a connection not to reuse: a client that left, an answer cut short). A read that fails because the
upstream failed mid-answer raises one of the answer's ``read_errors``; ``failure_text`` says what happened in words.

A request's body is bytes on every JSON route. Two callers send a streamed body instead, which only the aiohttp
transport sends today: a multipart form rebuilt from spooled files (images edits, audio transcriptions) and a file
upload relayed to a provider (``jobs/passthrough.py``, wrapped as aiohttp's payload so a resend starts from the
file's start). A transport without streamed bodies leaves those to the aiohttp one.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import ClassVar

from gateway.upstream.request import UpstreamRequest


class UpstreamResponse(abc.ABC):
    """An upstream answer whose status and headers have arrived; its body is still to be read."""

    __slots__ = ()

    #: the answer's HTTP status
    status: int
    #: what a read raises when the upstream fails mid-answer (a read timeout, a broken connection, a cut body)
    read_errors: ClassVar[tuple[type[BaseException], ...]]

    @property
    @abc.abstractmethod
    def headers(self) -> Mapping[str, str]:
        """The answer's headers, names case-insensitive."""

    @abc.abstractmethod
    async def read_body(self) -> bytes:
        """The whole body, bounded (past GATEWAY_MAX_UPSTREAM_BODY_BYTES the connection is dropped and a 502
        raised); a failure on the way is a 504 (timeout) or 502 (the connection broke)."""

    @abc.abstractmethod
    def read_some(self) -> Awaitable[bytes]:
        """The next piece of the body as it arrives; ``b""`` once it ended. Raises one of ``read_errors``."""

    @abc.abstractmethod
    def chunks(self, size: int = 0) -> AsyncIterator[bytes]:
        """The rest of the body piece by piece as it arrives (``size``: in pieces of that many bytes, the last one
        shorter). Raises one of ``read_errors``."""

    @abc.abstractmethod
    def release(self) -> object:
        """Done with the answer: its connection goes back to the pool (once the body is read)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Drop the answer and its connection (never reused)."""

    @staticmethod
    @abc.abstractmethod
    def failure_text(exc: BaseException) -> str:
        """What a failed read means, in words, continuing "upstream HOST ..."."""


class UpstreamTransport(abc.ABC):
    """Sends an ``UpstreamRequest`` and answers with the response, its headers read and its body not yet."""

    __slots__ = ()

    @abc.abstractmethod
    async def open(self, req: UpstreamRequest, stream: bool = False) -> UpstreamResponse:
        """Send ``req``; ``stream`` bounds the answer's silences rather than its whole time. A failure to send
        or to get the head is a GatewayError (403 a refused host, 502 unreachable, 504 a timeout)."""

    @abc.abstractmethod
    async def check(self, url: str) -> None:
        """Refuse (403 / 400) a URL the gateway may not call, before anything is sent to it."""

    async def start(self) -> None:
        """Get ready to send (open pools); a worker awaits it once at start."""
        return None

    async def close(self) -> None:
        """Release what ``start`` took; a worker awaits it once at shutdown."""
        return None
