"""Redis URLs the gateway accepts (``GATEWAY_REDIS_URL``), checked without importing redis-py.

- ``redis://[user:pass@]host[:port][/db]``, ``rediss://`` (TLS) and ``unix:///path/to/socket[?db=N]``;
- a cluster: ``redis+cluster://[user:pass@]host:port[,host:port...]`` (``rediss+cluster://`` for TLS).

``check_redis_url`` answers why a URL is unusable (never repeating it: it may hold a password), so a typo is a
start-up message naming the setting rather than a traceback from the first connection.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
SINGLE_SCHEMES = ("redis", "rediss", "unix")


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> tuple[list[tuple[str, int]], str | None, str | None, bool]:
    """``redis+cluster://[user:pass@]host:port,host:port`` -> (nodes, username, password, tls)."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in CLUSTER_SCHEMES:
        raise ValueError(f"not a cluster URL: {scheme}://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    username = password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, sep, secret = auth.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if sep else None)
    nodes = []
    for part in netloc.split(","):
        parsed = urlsplit("//" + part.strip())
        try:
            port = parsed.port
        except ValueError:
            raise ValueError("cluster URL: a node's port must be a number 1..65535") from None
        if not parsed.hostname:
            raise ValueError(f"cluster URL: a node needs host:port, got {part.rpartition('@')[2]!r}")
        nodes.append((parsed.hostname, port or 6379))
    return nodes, username, password, CLUSTER_SCHEMES[scheme.lower()]


def check_redis_url(url: str) -> None:
    """Raise ValueError saying what is wrong with ``url`` (the URL itself is not repeated)."""
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (*SINGLE_SCHEMES, *CLUSTER_SCHEMES):
        raise ValueError("must start with redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://")
    if scheme in CLUSTER_SCHEMES:
        parse_cluster_url(url)
        return
    parts = urlsplit(url)
    if scheme == "unix":
        if not parts.path:
            raise ValueError("a unix:// URL needs the socket's path")
        return
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ValueError("the port must be a number 1..65535") from None
    if not parts.hostname:
        raise ValueError("needs a host: redis://host:port/db")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"the database after the host must be a number, got {db!r}")
