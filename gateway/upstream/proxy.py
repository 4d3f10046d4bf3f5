"""Outbound proxies: which upstream calls go through HTTP_PROXY / HTTPS_PROXY, and which NO_PROXY sends direct.

The usual conventions of these variables: ``HTTP_PROXY`` serves ``http://`` upstreams (the proxy is sent the
absolute URL), ``HTTPS_PROXY`` serves ``https://`` upstreams (through a ``CONNECT`` tunnel, so TLS still ends at the
upstream). A proxy URL may carry ``user:password@`` (sent as Basic ``Proxy-Authorization``); one without a scheme
means ``http://``. ``NO_PROXY`` is a comma-separated list: ``*`` (every host direct), host names matching
themselves and their subdomains (``example.com``, ``.example.com`` and ``*.example.com`` all cover
``api.example.com``), IP addresses and CIDR ranges (matching literal-address hosts), each optionally with ``:port``.

The proxies themselves are the operator's: the SSRF guard does not refuse their (often private) addresses.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Proxy:
    """One proxy: its URL without credentials, its Basic auth, and its host and port."""

    __slots__ = ("url", "auth", "host", "port")

    def __init__(self, raw: str, variable: str) -> None:
        text = raw.strip()
        if "://" not in text:
            text = "http://" + text
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{variable}: not a valid proxy URL: {raw!r}") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{variable}: a proxy URL must be http(s)://host[:port], got {raw!r}")
        self.host = parts.hostname
        self.port = port or (443 if parts.scheme.lower() == "https" else 80)
        self.auth = aiohttp.BasicAuth.from_url(URL(text)) if parts.username is not None else None
        self.url = URL(text).with_user(None)


class NoProxyRule:
    """One NO_PROXY entry."""

    __slots__ = ("domain", "network", "port")

    def __init__(self, entry: str) -> None:
        self.port: int | None = None
        self.network: IPNetwork | None = None
        text = entry.strip().lower()
        if text.startswith("[") and "]" in text:  # [::1]:8080
            host, _, rest = text[1:].partition("]")
            text = host
            if rest.startswith(":") and rest[1:].isdigit():
                self.port = int(rest[1:])
        elif text.count(":") == 1:
            host, _, port = text.partition(":")
            if port.isdigit():
                text, self.port = host, int(port)
        try:
            self.network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            pass
        self.domain = text.removeprefix("*").lstrip(".")

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            try:
                return ipaddress.ip_address(host.strip("[]")) in self.network
            except ValueError:
                return False
        return host == self.domain or host.endswith("." + self.domain)


class ProxyRoutes:
    """Picks the proxy (or none) for an upstream URL; built once from the settings."""

    def __init__(self, http_proxy: str | None, https_proxy: str | None, no_proxy: tuple[str, ...] = ()) -> None:
        self.http = Proxy(http_proxy, "HTTP_PROXY") if http_proxy and http_proxy.strip() else None
        self.https = Proxy(https_proxy, "HTTPS_PROXY") if https_proxy and https_proxy.strip() else None
        entries = [e for e in no_proxy if e.strip()]
        self.bypass_all = any(e.strip() == "*" for e in entries)
        self.rules = [NoProxyRule(e) for e in entries if e.strip() != "*"]

    @property
    def enabled(self) -> bool:
        return (self.http is not None or self.https is not None) and not self.bypass_all

    def endpoints(self) -> set[str]:
        """The proxies' host names, lower-cased (the resolver lets them through as configured)."""
        return {p.host.lower().rstrip(".") for p in (self.http, self.https) if p is not None}

    def for_url(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy for an upstream at ``scheme://host:port``, or None to connect directly."""
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or self.bypass_all:
            return None
        name = host.lower().rstrip(".")
        for rule in self.rules:
            if rule.matches(name, port):
                return None
        return proxy
