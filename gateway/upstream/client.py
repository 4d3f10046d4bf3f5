"""The upstream HTTP client: one aiohttp session per worker, a keep-alive pool per upstream host, bounded waits.

Timeouts: connect (GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS) and per-read (GATEWAY_UPSTREAM_READ_TIMEOUT_MS) bound every
attempt and answer 504 when they run out; a request_timeout (config, header or GATEWAY_REQUEST_TIMEOUT_MS) is
applied by the caller around the attempt and answers 408. Unreachable upstreams answer 502; a host the SSRF guard
refuses answers 403, whether the pre-check or the pinned resolver (at connect time) refuses it.

A request that fails on an established connection before the upstream answered anything (a pooled keep-alive
connection the upstream had already closed: the write fails, or the connection closes unanswered) is sent once
more on a new connection, whatever the retry config says; a second failure is the answer.

The sessions keep no cookies: a cookie an upstream sets on one caller's answer (a CDN's bot-management cookie)
is never sent with another caller's request, nor passed back to the caller.

Upstream calls go through HTTP_PROXY / HTTPS_PROXY unless NO_PROXY exempts the host (see ``proxy.py``). The SSRF
pre-check still runs for a proxied call: literal non-public addresses, metadata names and names that resolve (with
the gateway's resolver) to non-public addresses are refused; a name the gateway cannot resolve is left to the
proxy. The proxy resolves the name again itself, so a proxied connection is not pinned to the checked address:
egress rules on the proxy cover that gap.

An answer read whole (``read_body``: JSON answers, error bodies, model lists, token exchanges) is bounded as it is
read, counted after decompression, by GATEWAY_MAX_UPSTREAM_BODY_BYTES: past it the connection is dropped and the
answer is a 502 naming the limit. Streams and media are relayed read by read and never held whole.

Messages say what happened in plain words (never a library's exception class names).

This is the aiohttp ``UpstreamTransport`` (``transport.py``); its answers are ``AiohttpResponse``: aiohttp's response
object with the interface's reads added (no wrapper per answer).
"""

from __future__ import annotations

import functools
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable
from typing import cast

import aiohttp
from aiohttp.client_proto import ResponseHandler
from yarl import URL

from gateway import USER_AGENT
from gateway.bounded_cache import BoundedCache
from gateway.http.errors import BadUpstreamResponse, Forbidden, UpstreamTimeout, UpstreamUnreachable, mid_sentence
from gateway.settings import Settings
from gateway.upstream.proxy import Proxy, ProxyRoutes
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.ssrf import AllowList, HostBlocked, PinnedResolver, check_url
from gateway.upstream.transport import UpstreamResponse, UpstreamTransport

#: every call the gateway makes (providers, webhooks, JWKS, token exchanges) names it, unless the request sets its own
_SESSION_HEADERS = (("user-agent", USER_AGENT),)


class _DeadlineReadTimeout(ResponseHandler):
    """aiohttp's response protocol with its per-read timeout (a stream's ``sock_read``: the longest silence) kept
    as a deadline. aiohttp cancels a timer and starts another on every socket read; here a read only moves the
    deadline, and the one timer, when it fires before the deadline, waits for it again. The bound is the same; the
    work per read is one clock read instead of a timer (5% of a worker's time relaying 5,000 streams at once)."""

    _read_deadline = 0.0
    #: when the pending timer fires
    _timer_at = 0.0

    def _reschedule_timeout(self) -> None:
        timeout = self._read_timeout
        if not timeout:
            self._drop_timeout()
            return
        deadline = self._loop.time() + timeout
        self._read_deadline = deadline
        handle = self._read_timeout_handle
        if handle is None or deadline < self._timer_at:  # none pending, or one that would fire too late
            if handle is not None:
                handle.cancel()
            self._timer_at = deadline
            self._read_timeout_handle = self._loop.call_at(deadline, self._on_read_timeout)

    def _on_read_timeout(self) -> None:
        deadline = self._read_deadline
        if self._loop.time() < deadline:  # data came since the timer was set: wait for the moved deadline
            self._timer_at = deadline
            self._read_timeout_handle = self._loop.call_at(deadline, self._on_read_timeout)
            return
        self._read_timeout_handle = None
        super()._on_read_timeout()


#: the private hooks of aiohttp's response protocol the deadline overrides (aiohttp 3.9 to 3.14 have them); an
#: aiohttp without them keeps its own per-read timer, the same bound at more cost per read
DEADLINE_HOOKS = ("_reschedule_timeout", "_on_read_timeout", "_drop_timeout")
_DEADLINE_READS = all(hasattr(ResponseHandler, name) for name in DEADLINE_HOOKS)


class AiohttpResponse(aiohttp.ClientResponse, UpstreamResponse):
    """aiohttp's answer with the transport interface's reads (``UpstreamResponse``); ``max_bytes`` is the client's
    GATEWAY_MAX_UPSTREAM_BODY_BYTES (each client makes a subclass that sets it)."""

    max_bytes: int = 0
    read_errors = (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)

    async def read_body(self) -> bytes:
        """The whole upstream body, at most ``max_bytes`` once decompressed, with read failures mapped to 504/502.

        The body is read as aiohttp hands it over (decompressed, a buffer's worth at a time, the socket paused while
        nothing reads) and counted as it comes: the read that passes it closes the connection (it never goes
        back to the pool) and answers 502, so no more than the limit and one read are ever held.
        """
        limit = self.max_bytes
        content = self.content
        chunks: list[bytes] = []
        size = 0
        try:
            while chunk := await content.readany():
                size += len(chunk)
                if size > limit:
                    self.close()
                    raise answer_too_large(self.url.host or "", limit)
                chunks.append(chunk)
        except (TimeoutError, aiohttp.SocketTimeoutError):
            raise UpstreamTimeout(f"timed out reading from upstream {self.url.host}") from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(f"upstream {self.url.host} {failure_text(exc)}") from exc
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def read_some(self) -> Awaitable[bytes]:
        return self.content.readany()

    def chunks(self, size: int = 0) -> AsyncIterator[bytes]:
        content = self.content
        return cast(AsyncIterator[bytes], content.iter_chunked(size) if size else content.iter_any())

    @staticmethod
    def failure_text(exc: BaseException) -> str:
        """A stream that broke off: "closed the connection" (after answering), else as ``failure_text``."""
        return "closed the connection" if isinstance(exc, aiohttp.ServerDisconnectedError) else failure_text(exc)


class UpstreamClient(UpstreamTransport):
    """The aiohttp transport: sends UpstreamRequests; the caller reads (or streams) and releases the response."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.proxies = ProxyRoutes(settings.http_proxy, settings.https_proxy, settings.no_proxy)
        self.resolver = PinnedResolver(AllowList(settings.allow_private_hosts), trusted=self.proxies.endpoints())
        self.session: aiohttp.ClientSession | None = None
        #: sessions whose connections are never reused: the one retry after a stale pooled connection
        self._fresh: aiohttp.ClientSession | None = None
        connect_s = settings.upstream_connect_timeout_ms / 1000
        read_s = settings.upstream_read_timeout_ms / 1000
        # A non-streamed answer is silent until it is complete, so one timer for the whole answer bounds the
        # silence as well as a per-read timer would, without re-arming a timer on every socket read.
        self._timeout = aiohttp.ClientTimeout(total=read_s, sock_connect=connect_s)
        self._stream_timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_s, sock_read=read_s)
        self._urls: BoundedCache[str, tuple[URL, str, int, Proxy | None]] = BoundedCache(8192)
        #: the largest answer ``read_body`` reads whole (GATEWAY_MAX_UPSTREAM_BODY_BYTES)
        self.max_answer_bytes = settings.max_upstream_body_bytes
        #: this client's answers: ``AiohttpResponse`` bounded by its limit (set once, nothing per answer)
        self._response_class: type[AiohttpResponse] = type(
            "AiohttpResponse", (AiohttpResponse,), {"max_bytes": settings.max_upstream_body_bytes})

    def _connector(self, fresh: bool = False) -> aiohttp.TCPConnector:
        """The pooled connector, or (``fresh``) one whose connections are closed after each use."""
        reuse = {"force_close": True} if fresh else {"keepalive_timeout": self.settings.pool_keepalive_s}
        connector = aiohttp.TCPConnector(
            resolver=self.resolver,
            use_dns_cache=False,
            limit=self.settings.pool_size,
            limit_per_host=self.settings.pool_size_per_host,
            enable_cleanup_closed=True,
            **reuse,
        )
        if _DEADLINE_READS and hasattr(connector, "_factory"):
            protocol: type[ResponseHandler] = _DeadlineReadTimeout
            connector._factory = functools.partial(protocol, loop=connector._loop)
        return connector

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(connector=self._connector(), timeout=self._timeout,
                                             auto_decompress=True, headers=_SESSION_HEADERS,
                                             cookie_jar=aiohttp.DummyCookieJar(),
                                             response_class=self._response_class)

    async def close(self) -> None:
        for session in (self.session, self._fresh):
            if session is not None:
                await session.close()
        self.session = self._fresh = None
        await self.resolver.close()

    def _url(self, url: str) -> tuple[URL, str, int, Proxy | None]:
        hit = self._urls.get(url)
        if hit is None:
            host, port, scheme = check_url(url, "custom_host")
            hit = self._urls.put(url, (URL(url, encoded=True), host, port, self.proxies.for_url(scheme, host, port)))
        return hit

    async def check(self, url: str) -> None:
        """The SSRF check for ``url`` (403 / 400 when refused); cheap when the host was checked recently."""
        _, host, port, _ = self._url(url)
        await self.resolver.check(host, port)

    async def open(self, req: UpstreamRequest, stream: bool = False) -> AiohttpResponse:
        """Send the request and return the response with its headers read (body not yet read)."""
        session = self.session
        assert session is not None, "UpstreamClient.start() was not awaited"
        url, host, port, proxy = self._url(req.url)
        if not self.resolver.recently_checked(host, port):
            await self.resolver.check(host, port)
        timeout = self._stream_timeout if stream else self._timeout
        try:
            try:
                if proxy is None:
                    return await session.request(  # type: ignore[return-value]  # the session's response_class
                        req.method, url, data=req.body, headers=req.headers, allow_redirects=False, timeout=timeout)
                return await session.request(  # type: ignore[return-value]
                    req.method, url, data=req.body, headers=req.headers,
                                             allow_redirects=False, timeout=timeout, proxy=proxy.url,
                                             proxy_auth=proxy.auth)
            except _UNANSWERED as exc:
                if isinstance(exc, aiohttp.ClientConnectorError):
                    raise
            return await self._fresh_session().request(  # type: ignore[return-value]
                req.method, url, data=req.body, headers=req.headers, allow_redirects=False, timeout=timeout,
                proxy=proxy.url if proxy else None, proxy_auth=proxy.auth if proxy else None)
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamTimeout(f"timed out connecting to upstream {host}" + _via(proxy)) from None
        except (TimeoutError, aiohttp.SocketTimeoutError):
            raise UpstreamTimeout(f"timed out waiting for upstream {host} to answer (read timeout)") from None
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, HostBlocked):
                raise Forbidden(str(exc.os_error), param="custom_host") from None
            raise UpstreamUnreachable(f"upstream {host}:{port}{_via(proxy)} {failure_text(exc)}") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(f"upstream {host}:{port}{_via(proxy)} {failure_text(exc)}") from exc

    async def read_body(self, resp: aiohttp.ClientResponse) -> bytes:
        """``resp``'s whole body, bounded (``AiohttpResponse.read_body``), for callers off the request path."""
        return await cast(AiohttpResponse, resp).read_body()

    def _fresh_session(self) -> aiohttp.ClientSession:
        if self._fresh is None:
            self._fresh = aiohttp.ClientSession(connector=self._connector(fresh=True), timeout=self._timeout,
                                                auto_decompress=True, headers=_SESSION_HEADERS,
                                                cookie_jar=aiohttp.DummyCookieJar(),
                                                response_class=self._response_class)
        return self._fresh


#: failures on an established connection before any answer: the write failed or the connection closed unanswered
_UNANSWERED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientConnectionResetError)


def _via(proxy: Proxy | None) -> str:
    return f" (through proxy {proxy.host}:{proxy.port})" if proxy is not None else ""


def failure_text(exc: BaseException) -> str:
    """What went wrong with an upstream exchange, in words (continues "upstream HOST ...")."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "closed the connection before answering"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "cut its answer off before the end"
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return f"could not be reached: the proxy answered HTTP {exc.status}"
    if isinstance(exc, aiohttp.ClientResponseError):
        return "sent an answer that is not valid HTTP"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "presented a TLS certificate that does not verify"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"is unreachable ({os_reason(exc.os_error) or 'connection refused or unreachable'})"
    if isinstance(exc, (aiohttp.ClientConnectionResetError, ConnectionResetError)):
        return "reset the connection"
    if isinstance(exc, OSError):
        return f"connection failed ({os_reason(exc) or 'closed while sending the request'})"
    if isinstance(exc, aiohttp.InvalidURL):
        return "has an invalid URL"
    return "failed"


_ERRNO = re.compile(r"\[Errno (\d+)\]")
#: asyncio's ``Connect call failed ('127.0.0.1', 19799)``: the address is a Python tuple
_ADDRESS = re.compile(r"\s*\((?:'[^']*'|[^()]*)(?:, \d+)+\)")


def os_reason(error: BaseException | None) -> str:
    """An OS error in words (``connection refused``), without asyncio's address tuples; "" when it says nothing."""
    if error is None:
        return ""
    number = getattr(error, "errno", None)
    if isinstance(number, int) and number > 0 and not isinstance(error, socket.gaierror):
        return os.strerror(number).lower()
    text = getattr(error, "strerror", None) or str(error)
    numbers = dict.fromkeys(int(n) for n in _ERRNO.findall(text))  # "Multiple exceptions: [Errno 111] ..."
    if numbers:
        return "; ".join(os.strerror(n).lower() for n in numbers)
    return mid_sentence(_ADDRESS.sub("", text).strip())


def answer_too_large(host: str, limit: int) -> BadUpstreamResponse:
    """The 502 for an upstream answer larger than GATEWAY_MAX_UPSTREAM_BODY_BYTES."""
    return BadUpstreamResponse(
        f"upstream {host} sent an answer larger than {limit} bytes (GATEWAY_MAX_UPSTREAM_BODY_BYTES); "
        "the gateway stopped reading it and dropped the connection", code="upstream_answer_too_large")
