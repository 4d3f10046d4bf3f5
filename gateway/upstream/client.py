"""The upstream HTTP client: one aiohttp session per worker, a keep-alive pool per upstream host, bounded waits.

Timeouts: connect (GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS) and per-read (GATEWAY_UPSTREAM_READ_TIMEOUT_MS) bound every
attempt and answer 504 when they run out; a request_timeout (config, header or GATEWAY_REQUEST_TIMEOUT_MS) is
applied by the caller around the attempt and answers 408. Unreachable upstreams answer 502.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from gateway.http.errors import UpstreamTimeout, UpstreamUnreachable
from gateway.providers.base import UpstreamRequest
from gateway.settings import Settings
from gateway.upstream.ssrf import AllowList, HostBlocked, PinnedResolver, check_url

class UpstreamClient:
    """Sends UpstreamRequests; the caller reads (or streams) and releases the response."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.resolver = PinnedResolver(AllowList(settings.allow_private_hosts))
        self.session: aiohttp.ClientSession | None = None
        connect_s = settings.upstream_connect_timeout_ms / 1000
        read_s = settings.upstream_read_timeout_ms / 1000
        # A non-streamed answer is silent until it is complete, so one timer for the whole answer bounds the
        # silence as well as a per-read timer would, without re-arming a timer on every socket read.
        self._timeout = aiohttp.ClientTimeout(total=read_s, sock_connect=connect_s)
        self._stream_timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_s, sock_read=read_s)
        self._urls: dict[str, tuple[URL, str, int]] = {}

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            resolver=self.resolver,
            use_dns_cache=False,
            limit=self.settings.pool_size,
            limit_per_host=self.settings.pool_size_per_host,
            keepalive_timeout=self.settings.pool_keepalive_s,
            enable_cleanup_closed=True,
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            auto_decompress=True,
        )

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None
        await self.resolver.close()

    def _url(self, url: str) -> tuple[URL, str, int]:
        hit = self._urls.get(url)
        if hit is None:
            host, port, _ = check_url(url, "custom_host")
            hit = (URL(url, encoded=True), host, port)
            if len(self._urls) > 8192:
                self._urls.clear()
            self._urls[url] = hit
        return hit

    async def check(self, url: str) -> None:
        """The SSRF check for ``url`` (403 / 400 when refused); cheap when the host was checked recently."""
        _, host, port = self._url(url)
        await self.resolver.check(host, port)

    async def open(self, req: UpstreamRequest, stream: bool = False) -> aiohttp.ClientResponse:
        """Send the request and return the response with its headers read (body not yet read)."""
        assert self.session is not None, "UpstreamClient.start() was not awaited"
        url, host, port = self._url(req.url)
        if not self.resolver.recently_checked(host, port):
            await self.resolver.check(host, port)
        try:
            return await self.session.request(
                req.method, url, data=req.body, headers=req.headers, allow_redirects=False,
                timeout=self._stream_timeout if stream else self._timeout,
            )
        except (aiohttp.ConnectionTimeoutError, aiohttp.SocketTimeoutError, asyncio.TimeoutError):
            raise UpstreamTimeout(f"timed out connecting to upstream {host}") from None
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, HostBlocked):
                raise UpstreamUnreachable(str(exc.os_error)) from None
            raise UpstreamUnreachable(f"upstream {host}:{port} is unreachable: {exc.os_error}") from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(f"upstream {host}:{port} failed: {exc.__class__.__name__}: {exc}") from None


async def read_body(resp: aiohttp.ClientResponse, host: str = "") -> bytes:
    """The whole upstream body, with read failures mapped to 504/502."""
    try:
        return await resp.read()
    except (aiohttp.SocketTimeoutError, asyncio.TimeoutError):
        raise UpstreamTimeout(f"timed out reading from upstream {host or resp.url.host}") from None
    except aiohttp.ClientError as exc:
        raise UpstreamUnreachable(f"upstream {host or resp.url.host} broke off: {exc.__class__.__name__}") from None


def host_of(url: str) -> str:
    return urlsplit(url).hostname or ""
