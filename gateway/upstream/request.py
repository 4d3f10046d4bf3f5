"""The request the upstream client sends: an adapter builds it, the client sends it (it lives here, below the
providers, so the client never imports an adapter's module)."""

from __future__ import annotations


class UpstreamRequest:
    """What the upstream client sends."""

    __slots__ = ("url", "headers", "body", "method")

    def __init__(self, url: str, headers: dict[str, str], body: bytes, method: str = "POST") -> None:
        self.url = url
        self.headers = headers
        self.body = body
        self.method = method
