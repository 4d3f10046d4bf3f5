"""SSRF guard: URL rules, address checks, and a resolver that pins connections to the checked addresses.

Rules: only http and https; no fragment; no credentials in the URL. A host is refused when any address it resolves
to is private, loopback, link-local, reserved, multicast, unspecified, shared (CGNAT) or a cloud metadata address,
or when its name is a known metadata name, unless it is allow-listed in GATEWAY_ALLOW_PRIVATE_HOSTS (host names,
addresses or CIDRs). The aiohttp connector resolves through ``PinnedResolver``, which hands out only addresses that
passed the check, so the connection goes where the check looked (no DNS-rebinding gap). Refusals raise
``Forbidden`` (403) before any connection is made.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from gateway.bounded_cache import BoundedCache
from gateway.http.errors import Forbidden, InvalidRequest

METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal",
     "metadata.azure.com", "metadata.packet.net"}
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200",
                                       "192.0.0.192")
)
_CACHE_TTL_S = 30.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class HostBlocked(OSError):
    """Raised inside the resolver when a host resolves to a refused address."""


class AllowList:
    """GATEWAY_ALLOW_PRIVATE_HOSTS: names, addresses and networks that may be private."""

    def __init__(self, entries: tuple[str, ...] | list[str]) -> None:
        self.names: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in entries:
            entry = entry.strip().lower().strip("[]")
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.add(entry.rstrip("."))

    def allows_name(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.names

    def allows_address(self, address: IPAddress) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)


def refused_reason(address: IPAddress) -> str | None:
    """Why an address is refused, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a non-public address"
    return None


def check_url(url: str, field: str = "custom_host") -> tuple[str, int, str]:
    """Validate a URL's form; returns (host, port, scheme). Literal refused addresses are refused here."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidRequest(f"{field} is not a valid URL: {url!r}", param=field) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidRequest(f"{field} must use http or https, not {scheme or 'no scheme'!r}", param=field)
    if parts.fragment or "#" in url:
        raise InvalidRequest(f"{field} must not contain a fragment", param=field)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise InvalidRequest(f"{field} must not contain credentials", param=field)
    host = parts.hostname
    if not host:
        raise InvalidRequest(f"{field} has no host: {url!r}", param=field)
    return host, port or (443 if scheme == "https" else 80), scheme


def check_base_url(url: str, field: str = "custom_host") -> tuple[str, int, str]:
    """``check_url`` for a base URL the gateway appends route paths to (a ``custom_host``): a query string would
    end up before the path, so it is refused too."""
    checked = check_url(url, field)
    if "?" in url:
        raise InvalidRequest(f"{field} must not contain a query string (it is a base URL; the route path follows it)",
                             param=field)
    return checked


class PinnedResolver(AbstractResolver):
    """Resolves, refuses non-public addresses (unless allow-listed) and caches what passed for a short time."""

    def __init__(self, allow: AllowList, inner: AbstractResolver | None = None,
                 trusted: set[str] | frozenset[str] = frozenset()) -> None:
        self.allow = allow
        self._inner = inner
        #: the operator's outbound proxies: resolved and connected to as configured (never an upstream's name)
        self.trusted = frozenset(trusted)
        self._cache: BoundedCache[tuple[str, int], tuple[float, list[ResolveResult]]] = BoundedCache(4096)
        self._checked: BoundedCache[tuple[str, int], float] = BoundedCache(4096)

    def _resolver(self) -> AbstractResolver:
        if self._inner is None:
            self._inner = DefaultResolver()
        return self._inner

    def literal_refusal(self, host: str) -> str | None:
        """For an IP literal or a metadata name: why it is refused (None when allowed or not a literal)."""
        name = host.lower().rstrip(".").strip("[]")
        if self.allow.allows_name(name):
            return None
        if name in METADATA_NAMES:
            return "a cloud metadata host"
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return None
        if self.allow.allows_address(address):
            return None
        return refused_reason(address)

    def recently_checked(self, host: str, port: int) -> bool:
        """True while an earlier check of this host passed (the common case: no await needed)."""
        return self._checked.get((host, port), 0.0) > time.monotonic()

    async def check(self, host: str, port: int) -> None:
        """Refuse (403) a host that is or resolves to a refused address; fills the pin cache."""
        key = (host, port)
        now = time.monotonic()
        if self._checked.get(key, 0.0) > now:
            return
        reason = self.literal_refusal(host)
        if reason is not None:
            raise Forbidden(f"upstream host {host!r} is blocked: it is {reason}", param="custom_host")
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            try:
                await self._pinned(host, port)
            except HostBlocked as exc:
                raise Forbidden(str(exc), param="custom_host") from None
            except OSError:
                return  # unresolvable: the connection attempt reports it (502)
        self._checked[key] = now + _CACHE_TTL_S

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        """What the connector connects to: the checked addresses (a configured proxy's as they resolve)."""
        if self.trusted and host.lower().rstrip(".") in self.trusted:
            return await self._resolver().resolve(host, port, socket.AF_UNSPEC)
        return await self._pinned(host, port)

    async def _pinned(self, host: str, port: int) -> list[ResolveResult]:
        key = (host, port)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        if self.literal_refusal(host) is not None:
            raise HostBlocked(f"upstream host {host!r} is blocked: it is {self.literal_refusal(host)}")
        results = await self._resolver().resolve(host, port, socket.AF_UNSPEC)
        if not self.allow.allows_name(host):
            for result in results:
                address = ipaddress.ip_address(result["host"])
                if self.allow.allows_address(address):
                    continue
                reason = refused_reason(address)
                if reason is not None:
                    raise HostBlocked(f"upstream host {host!r} is blocked: it resolves to {reason}")
        self._cache[key] = (now + _CACHE_TTL_S, results)
        return results

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()
