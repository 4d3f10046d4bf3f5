"""``GET /console``: the web console, its static files, and the read-only API routes it uses (mounted together
unless ``GATEWAY_CONSOLE=off``).

The files are read from the package once, when the routes are mounted, and answered from memory with an ETag
(``If-None-Match`` gets a 304) and ``Cache-Control: no-cache``. Every console response carries a strict
Content-Security-Policy (scripts, styles and connections only from the gateway itself; no inline script, no
``eval``; no framing), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``. The page holds no
data: everything it shows comes from API calls made with the key the operator enters (kept in the tab's
``sessionStorage``), so it can do nothing that key could not do through the API.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any, Sequence

from gateway.api.admin import Mount
from gateway.http.respond import send_bytes
from gateway.http.types import ASGIApp, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    b"font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
CONTENT_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
}
PAGE = "/console"


class StaticFile:
    """One file answered from memory with the console's security headers."""

    def __init__(self, body: bytes, content_type: bytes) -> None:
        self.body = body
        self.etag = b'"' + hashlib.sha256(body).hexdigest()[:20].encode() + b'"'
        self.headers = [(b"content-type", content_type), (b"cache-control", b"no-cache"), (b"etag", self.etag),
                        *SECURITY_HEADERS]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        for name, value in scope["headers"]:
            if name.lower() == b"if-none-match" and self.etag in value:
                await send_bytes(send, 304, b"", [(b"etag", self.etag), *SECURITY_HEADERS])
                return
        await send_bytes(send, 200, self.body, self.headers)


async def _to_page(scope: Scope, receive: Receive, send: Send) -> None:
    """``/console/`` -> ``/console`` (relative, so a gateway served under a path prefix keeps it)."""
    await send_bytes(send, 308, b"", [(b"location", b"../console"), *SECURITY_HEADERS])


def static_files() -> dict[str, StaticFile]:
    """URL path -> file, for every servable file under ``gateway/console/static``."""
    root = resources.files("gateway.console").joinpath("static")
    files: dict[str, StaticFile] = {}

    def walk(folder: Any, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
                continue
            suffix = entry.name[entry.name.rfind("."):] if "." in entry.name else ""
            if suffix in CONTENT_TYPES:
                files[f"{PAGE}/{prefix}{entry.name}"] = StaticFile(entry.read_bytes(), CONTENT_TYPES[suffix])

    walk(root, "")
    files[PAGE] = files.pop(f"{PAGE}/index.html")
    return files


def mount_console(app: Mount, routes: Sequence[tuple[str, str, ASGIApp]]) -> None:
    """Add the console page, its files and its API ``routes`` (method, path, handler) to ``app``'s route table."""
    for path, file in static_files().items():
        app.add("GET", path, file)
    app.add("GET", f"{PAGE}/", _to_page)
    for method, path, handler in routes:
        app.add(method, path, handler)
