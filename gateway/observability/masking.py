"""Masking of secrets in request logs: credential and sensitive header values become ``sha256:<16 hex>``.

The values of credential headers (``authorization``, ``x-api-key``, ``api-key``, ...), of headers named in
``x-gateway-sensitive-headers`` and of those in ``ORGANISATION_HEADERS_TO_MASK`` are replaced by
``sha256:<first 16 hex of their SHA-256>`` (an ``authorization`` value keeps its scheme: ``Bearer sha256:...``), and
any clear occurrence of those values in an error message or a logged body is replaced by the same hash. Gateway
headers (``x-gateway-*``, among them the gateway key and cloud credentials) are never logged. The credentials the
gateway itself sends upstream are hashed the same way in an upstream's error before it goes anywhere
(``gateway/upstream/error_text.py``).
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from gateway.bounded_cache import BoundedCache

#: header values that are credentials whatever the request says
ALWAYS_MASKED = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie"}
)
_SCHEMES = ("bearer ", "basic ", "token ")
#: shorter values are not searched for in free text (too many false hits)
MIN_SECRET = 6


def hash_value(value: str) -> str:
    """``sha256:<first 16 hex>`` of a secret value: what logs show instead of it."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:16]


class Masker:
    """Masks credential and sensitive headers; remembers recent hashes (the same keys come back all the time)."""

    def __init__(self, organisation: Iterable[str] = ()) -> None:
        self.masked = ALWAYS_MASKED | frozenset(n.strip().lower() for n in organisation if n.strip())
        self._hashes: BoundedCache[str, str] = BoundedCache(4096)

    def hash(self, value: str) -> str:
        hashed = self._hashes.get(value)
        if hashed is None:
            hashed = self._hashes.put(value, hash_value(value))
        return hashed

    def headers(self, headers: dict[str, str] | None, sensitive: frozenset[str]) -> tuple[dict[str, str], list[str]]:
        """A masked copy of the headers and the clear secrets found in them (to scrub from free text)."""
        if not headers:
            return {}, []
        masked = self.masked
        out: dict[str, str] = {}
        secrets: list[str] = []
        for name, value in headers.items():
            if name in masked or name in sensitive:
                secret = value
                prefix = ""
                low = value[:7].lower()
                for scheme in _SCHEMES:
                    if low.startswith(scheme):
                        prefix, secret = value[: len(scheme)], value[len(scheme):].strip()
                        break
                out[name] = prefix + self.hash(secret)
                secrets.append(secret)
                if secret != value:
                    secrets.append(value)
            else:
                out[name] = value
        return out, secrets

    def scrub(self, text: str, secrets: list[str]) -> str:
        for secret in secrets:
            if len(secret) >= MIN_SECRET and secret in text:
                text = text.replace(secret, self.hash(secret))
        return text

    def scrub_bytes(self, data: bytes, secrets: list[str]) -> bytes:
        for secret in secrets:
            raw = secret.encode("utf-8", "surrogateescape")
            if len(raw) >= MIN_SECRET and raw in data:
                data = data.replace(raw, self.hash(secret).encode())
        return data
