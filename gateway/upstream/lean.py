"""The lean transport: the request path's upstream calls over a keep-alive pool of loop transports, llhttp parsing.

``LeanTransport`` is the ``UpstreamTransport`` (``transport.py``) a worker's exchange uses by default
(GATEWAY_UPSTREAM_TRANSPORT=lean). A request goes out as one write: the head from ``head_in_use.request_head``
(compiled), built from the target's default lines (``TargetHead``, once per upstream) and the request's own headers,
followed by its body; the answer is parsed by llhttp (``connection.py``) and its body handed to the reader as it is
read (``LeanResponse``), decoded a bounded piece at a time (``decoders.py``). What it keeps of the aiohttp client's
guarantees (``client.py``):

- connect timeout (GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS, TLS handshake included) and read timeout
  (GATEWAY_UPSTREAM_READ_TIMEOUT_MS: the whole answer of a JSON call, the longest silence of a stream) as deadlines:
  504 when they run out; no room under the pool limits before the read timeout is a 504 too;
- a request that fails on a connection before any answer byte arrived (a pooled connection the upstream had closed)
  is sent once more on a new connection; a second failure is the answer (502);
- the SSRF guard: the URL checked before sending (403), and the connection made to the address the check resolved
  (``ssrf.PinnedResolver``), the name sent as TLS SNI and checked against the certificate;
- TLS verified against the system's trust store (``ssl.create_default_context``: also ``SSL_CERT_FILE``);
- gzip, deflate and br decoded, a whole-body read bounded by GATEWAY_MAX_UPSTREAM_BODY_BYTES counted decoded (502);
- Content-Length, chunked and close-delimited bodies, HTTP/1.0 and ``Connection: close`` upstreams, 1xx skipped,
  bounded heads, malformed answers 502, no cookies, CR/LF/NUL refused in every header sent (400 naming it);
- a connection whose answer was not read to its end is closed, never pooled (``release`` pools only a finished one).

Left to the aiohttp transport (``general``, which the lean one holds): upstreams reached through HTTP_PROXY /
HTTPS_PROXY, request bodies that are streamed rather than bytes (multipart media uploads, file passthrough), and
HEAD requests. Calls off the request path (webhooks, JWKS, token exchanges, OTLP) use aiohttp directly.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections import deque
from collections.abc import AsyncIterator, Mapping

from multidict import CIMultiDict, CIMultiDictProxy

from gateway import USER_AGENT
from gateway.bounded_cache import BoundedCache
from gateway.http.errors import Forbidden, InvalidRequest, UpstreamTimeout, UpstreamUnreachable
from gateway.settings import Settings
from gateway.upstream.client import UpstreamClient, answer_too_large, os_reason
from gateway.upstream.connection import AnswerTimeout, BadAnswer, ConnectionBroke, UpstreamConnection
from gateway.upstream.decoders import ACCEPT_ENCODING, DecodeFailed, Decoder, decoder_for
from gateway.upstream.head import HeaderRefused, TargetHead
from gateway.upstream.head_in_use import request_head
from gateway.upstream.pool import ConnectionPool, PoolTimeout
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.ssrf import HostBlocked, check_url
from gateway.upstream.transport import UpstreamResponse, UpstreamTransport
from gateway.waiting import within

#: request bodies up to this size go out in the same write as the head (one copy, one send)
_JOIN_BODY_BYTES = 64 * 1024


class LeanResponse(UpstreamResponse):
    """An answer read off an ``UpstreamConnection`` (see ``UpstreamResponse`` for the reads)."""

    __slots__ = ("status", "host", "_conn", "_pool", "_limit", "_decoder", "_headers", "_raw")

    read_errors = (AnswerTimeout, ConnectionBroke, BadAnswer, DecodeFailed)

    def __init__(self, conn: UpstreamConnection, pool: ConnectionPool, host: str, limit: int) -> None:
        self.status = conn.status
        self.host = host
        self._conn: UpstreamConnection | None = conn
        self._pool = pool
        self._limit = limit
        self._headers: CIMultiDictProxy[str] | None = None
        coding = conn.coding
        self._decoder: Decoder | None = decoder_for(coding.decode("latin-1")) if coding is not None else None
        #: the head's fields as they came (the connection starts a new list for its next answer)
        self._raw = conn.raw_headers

    @property
    def headers(self) -> Mapping[str, str]:
        headers = self._headers
        if headers is None:
            headers = self._headers = CIMultiDictProxy(CIMultiDict(
                (name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape"))
                for name, value in self._raw))
        return headers

    async def read_some(self) -> bytes:
        conn = self._conn
        if conn is None:
            return b""
        decoder = self._decoder
        while True:
            if decoder is not None and decoder.pending:
                out = decoder.more()
                if out:
                    return out
                continue
            pieces = conn.pieces
            if pieces:
                piece = pieces.popleft() if len(pieces) == 1 or decoder is not None else _take_all(pieces)
                conn.took(len(piece))
                if decoder is None:
                    return piece
                out = decoder.feed(piece)
                if out:
                    return out
                continue
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                if decoder is not None:
                    self._decoder = None
                    return decoder.flush()
                return b""
            await conn.wait()

    async def chunks(self, size: int = 0) -> AsyncIterator[bytes]:
        read = self.read_some
        if not size:
            while piece := await read():
                yield piece
            return
        held = b""
        while piece := await read():
            held = held + piece if held else piece
            while len(held) >= size:
                yield held[:size]
                held = held[size:]
        if held:
            yield held

    async def read_body(self) -> bytes:
        limit = self._limit
        pieces: list[bytes] = []
        size = 0
        read = self.read_some
        try:
            while piece := await read():
                size += len(piece)
                if size > limit:
                    self.close()
                    raise answer_too_large(self.host, limit)
                pieces.append(piece)
        except AnswerTimeout:
            self.close()
            raise UpstreamTimeout(f"timed out reading from upstream {self.host}") from None
        except (ConnectionBroke, BadAnswer, DecodeFailed) as exc:
            self.close()
            raise UpstreamUnreachable(f"upstream {self.host} {self.failure_text(exc)}") from None
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def release(self) -> None:
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        if conn.complete and conn.keep_alive and conn.error is None and not conn.closed and not conn.single_use and (
                self._decoder is None or not self._decoder.pending):
            self._pool.put(conn)
        else:
            self._pool.discard(conn)

    def close(self) -> None:
        conn = self._conn
        if conn is not None:
            self._conn = None
            self._pool.discard(conn)

    @staticmethod
    def failure_text(exc: BaseException) -> str:
        if isinstance(exc, (ConnectionBroke, BadAnswer)):
            return exc.what
        if isinstance(exc, DecodeFailed):
            return f"sent a body that does not decode in its Content-Encoding ({exc})"
        if isinstance(exc, TimeoutError):
            return "fell silent past the read timeout"
        return "failed"


def _take_all(pieces: deque[bytes]) -> bytes:
    """Every queued piece as one (a reader that fell behind catches up in one read)."""
    joined = b"".join(pieces)
    pieces.clear()
    return joined


class _Target:
    """One upstream URL as the lean transport sends to it (cached per URL)."""

    __slots__ = ("key", "host", "port", "tls", "literal", "path", "defaults", "proxied")

    def __init__(self, url: str, transport: LeanTransport) -> None:
        host, port, scheme = check_url(url, "custom_host")
        self.host = host
        self.port = port
        self.tls = scheme == "https"
        self.key = (scheme, host, port)
        self.proxied = transport.general.proxies.for_url(scheme, host, port) is not None
        try:
            ipaddress.ip_address(host.strip("[]"))
            self.literal = True
        except ValueError:
            self.literal = False
        authority = url.find("//") + 2
        ends = [i for i in (url.find("/", authority), url.find("?", authority)) if i >= 0]
        path = url[min(ends):] if ends else "/"
        if path.startswith("?"):  # a query right after the authority: the path is "/" (as aiohttp sends it)
            path = "/" + path
        self.path = path.split("#", 1)[0] or "/"
        self.defaults = transport.defaults(scheme, host, port)


class LeanTransport(UpstreamTransport):
    """The lean exchange's transport (see the module docstring); ``general`` is the aiohttp transport it leaves
    proxied upstreams and streamed bodies to."""

    def __init__(self, settings: Settings, general: UpstreamClient | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.general = general if general is not None else UpstreamClient(settings)
        self.resolver = self.general.resolver
        self.pool = ConnectionPool(settings.pool_size, settings.pool_size_per_host, settings.pool_keepalive_s)
        self._connect_s = settings.upstream_connect_timeout_ms / 1000
        self._read_s = settings.upstream_read_timeout_ms / 1000
        self._limit = settings.max_upstream_body_bytes
        self._ssl = ssl_context
        self._targets: BoundedCache[str, _Target] = BoundedCache(8192)
        self._heads: BoundedCache[tuple[str, str, int], TargetHead] = BoundedCache(8192)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        self.pool.start()
        await self.general.start()

    async def close(self) -> None:
        self.pool.close()
        await self.general.close()

    def defaults(self, scheme: str, host: str, port: int) -> TargetHead:
        key = (scheme, host, port)
        head = self._heads.get(key)
        if head is None:
            head = self._heads.put(key, TargetHead(host, port, scheme, USER_AGENT, ACCEPT_ENCODING))
        return head

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            target = self._targets.put(url, _Target(url, self))
        return target

    async def check(self, url: str) -> None:
        await self.general.check(url)

    async def open(self, req: UpstreamRequest, stream: bool = False) -> UpstreamResponse:
        body = req.body
        target = self._target(req.url)
        if target.proxied or type(body) is not bytes or req.method == "HEAD":
            return await self.general.open(req, stream)
        host = target.host
        if not self.resolver.recently_checked(host, target.port):
            await self.resolver.check(host, target.port)
        try:
            head = request_head(req.method, target.path, target.defaults, req.headers, len(body))
        except HeaderRefused as exc:
            raise InvalidRequest(f"the upstream request's {exc}", param=exc.name) from None
        loop = self._loop
        assert loop is not None, "LeanTransport.start() was not awaited"
        pool = self.pool
        conn = pool.take(target.key)
        if conn is None:
            try:
                conn = await pool.acquire(target.key, lambda: self._connect(target), loop.time() + self._read_s)
            except PoolTimeout:
                raise UpstreamTimeout(f"timed out waiting for a free connection to upstream {host} (the pool's "
                                      "limits: GATEWAY_POOL_SIZE, GATEWAY_POOL_SIZE_PER_HOST)") from None
        data = head + body if len(body) <= _JOIN_BODY_BYTES else None
        for attempt in (0, 1):
            error = await self._send(conn, head, body, data, stream)
            if error is None:
                return LeanResponse(conn, pool, host, self._limit)
            pool.discard(conn)
            if attempt == 0 and isinstance(error, ConnectionBroke) and not error.answered:
                conn = await pool.connect(target.key, lambda: self._connect(target))
                conn.single_use = True
                continue
            raise self._head_error(error, target) from None
        raise AssertionError("unreachable")

    async def _send(self, conn: UpstreamConnection, head: bytes, body: bytes, data: bytes | None, stream: bool
                    ) -> BaseException | None:
        """Write the request and wait for the answer's head; the failure that stopped it, or None."""
        conn.begin(stream, self._read_s)
        if conn.closed:
            return ConnectionBroke("closed the connection before answering", False)
        transport = conn.transport
        assert transport is not None
        if data is not None:
            transport.write(data)
        else:
            transport.write(head)
            transport.write(body)
        try:
            while not conn.head_done and conn.error is None:
                await conn.wait()
        except BaseException:
            self.pool.discard(conn)  # cancelled: the connection is mid-exchange, never reused
            raise
        return conn.error if not conn.head_done else None

    def _head_error(self, error: BaseException, target: _Target) -> Exception:
        if isinstance(error, AnswerTimeout):
            return UpstreamTimeout(f"timed out waiting for upstream {target.host} to answer (read timeout)")
        what = error.what if isinstance(error, (ConnectionBroke, BadAnswer)) else "failed"
        return UpstreamUnreachable(f"upstream {target.host}:{target.port} {what}")

    async def _connect(self, target: _Target) -> UpstreamConnection:
        """A new connection to ``target``'s checked address (TLS with its name as SNI), within the connect timeout."""
        host, port = target.host, target.port
        if target.literal:
            addresses = [host.strip("[]")]
        else:
            try:
                addresses = [result["host"] for result in await self.resolver.resolve(host, port)]
            except HostBlocked as exc:
                raise Forbidden(str(exc), param="custom_host") from None
            except OSError as exc:
                raise UpstreamUnreachable(
                    f"upstream {host}:{port} is unreachable ({os_reason(exc) or 'its name does not resolve'})"
                ) from None
        loop = self._loop
        assert loop is not None
        key = target.key
        last: OSError | None = None
        for address in addresses:
            try:
                _, conn = await within(loop.create_connection(
                    lambda: UpstreamConnection(loop, key), address, port,
                    ssl=self._ssl if target.tls else None,
                    server_hostname=host.strip("[]") if target.tls else None,
                    ssl_handshake_timeout=self._connect_s if target.tls else None), self._connect_s)
                return conn
            except TimeoutError:
                raise UpstreamTimeout(f"timed out connecting to upstream {host}") from None
            except ssl.SSLCertVerificationError:
                raise UpstreamUnreachable(
                    f"upstream {host}:{port} presented a TLS certificate that does not verify") from None
            except ssl.SSLError as exc:
                raise UpstreamUnreachable(f"upstream {host}:{port} failed the TLS handshake ({exc.reason or exc})"
                                          ) from None
            except OSError as exc:
                last = exc
        raise UpstreamUnreachable(
            f"upstream {host}:{port} is unreachable ({os_reason(last) or 'connection refused or unreachable'})")
