"""PostgreSQL URLs the log store accepts (``GATEWAY_LOG_STORE_URL``), checked without importing asyncpg.

``postgresql://user:password@host[:port]/database`` (``postgres://`` too, and libpq's query options such as
``?sslmode=require``). ``check_log_store_url`` answers why a URL is unusable without repeating it (it holds a
password), so a typo stops the start with a message naming the variable.
"""

from __future__ import annotations

from urllib.parse import urlsplit

SCHEMES = ("postgresql", "postgres")


def check_log_store_url(url: str) -> None:
    """Raise ValueError saying what is wrong with ``url`` (the URL itself is not repeated)."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError("must start with postgresql:// (postgresql://user:password@host:5432/database)")
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ValueError("the port must be a number 1..65535") from None
    if not parts.hostname and "host=" not in parts.query:
        raise ValueError("needs a host: postgresql://user:password@host:5432/database")
    if not parts.path.strip("/"):
        raise ValueError("needs a database name after the host: postgresql://user:password@host:5432/database")
