"""The request head the lean exchange writes: built once per upstream target, completed per request.

HTTP/1.1 (RFC 9112 section 3 and 5): a request line ``METHOD SP request-target SP HTTP/1.1 CRLF``, header fields
``name: value CRLF``, an empty line, then the body framed by ``Content-Length``. A field name is a token (RFC 9110
section 5.1: letters, digits and ``!#$%&'*+-.^_`|~``); a field value never holds CR, LF or NUL (RFC 9110 section
5.5), so a value holding one is refused here, whatever let it in, rather than splitting the head.

``TargetHead(host, port, scheme, agent, accept_encoding)`` holds the lines every request to one upstream carries
unless it names its own (``Host``, ``User-Agent``, ``Accept-Encoding``: the codings ``decoders.py`` reads).
``request_head`` completes it for one request: the request line, the request's own headers (a ``Host`` or
``User-Agent`` of its own replaces the default; ``Content-Length``, ``Transfer-Encoding`` and ``Connection`` are the
exchange's, so the request's are dropped), the defaults it did not name and ``Content-Length``. Names and values
are written as UTF-8 (as aiohttp writes them); an international host name as its IDNA A-labels.

This module is the pure twin of ``gateway._speedups.head`` (``_speedups/head.pyx``); ``head_in_use`` names the one
this process uses.
"""

from __future__ import annotations

__all__ = ["TargetHead", "HeaderRefused", "request_head"]

#: a token's characters besides letters and digits (RFC 9110 section 5.6.2)
_TOKEN_EXTRA = frozenset("!#$%&'*+-.^_`|~")
_TOKEN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") | _TOKEN_EXTRA
#: request header names the exchange writes itself (its framing): a request's own are dropped
_FRAMING = frozenset(("content-length", "transfer-encoding", "connection"))
#: methods that carry no body unless given one (as aiohttp: no ``Content-Length: 0`` for them)
_BODYLESS = frozenset(("GET", "HEAD", "OPTIONS", "TRACE", "CONNECT", "DELETE"))


class HeaderRefused(ValueError):
    """A request header the exchange will not write: its name is not a token, or its value holds CR, LF or NUL."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"header {name!r} {why}")
        self.name = name


class TargetHead:
    """The default lines of one upstream target's requests (see the module docstring)."""

    __slots__ = ("host", "agent", "encoding")

    def __init__(self, host: str, port: int, scheme: str, agent: str, accept_encoding: str) -> None:
        default_port = 443 if scheme == "https" else 80
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 literal
        elif not host.isascii():
            host = host.encode("idna").decode("ascii")  # an international name goes out as its A-labels (as yarl)
        authority = host if port == default_port else f"{host}:{port}"
        #: ``Host: ...\r\n`` (unless the request sends its own)
        self.host = f"Host: {authority}\r\n".encode("ascii")
        #: ``User-Agent: ...\r\n`` (unless the request sends its own)
        self.agent = f"User-Agent: {agent}\r\n".encode()
        #: ``Accept-Encoding: ...\r\n`` (unless the request sends its own)
        self.encoding = f"Accept-Encoding: {accept_encoding}\r\n".encode()


def _checked_name(name: str) -> bytes:
    if not name or not all(c in _TOKEN for c in name):
        raise HeaderRefused(name, "is not a valid header name")
    return name.encode()


def _checked_value(name: str, value: str) -> bytes:
    if "\r" in value or "\n" in value or "\x00" in value:
        raise HeaderRefused(name, "must not contain CR, LF or NUL characters (it is sent in the upstream request's "
                                  "head)")
    return value.encode("utf-8", "surrogateescape")


def request_head(method: str, target: str, defaults: TargetHead, headers: dict[str, str], length: int) -> bytes:
    """The whole head of one request (ending with the empty line): ``target`` is the path and query, ``length`` the
    body's size. Raises ``HeaderRefused`` for a header it will not write (nothing is written then)."""
    if " " in target or "\r" in target or "\n" in target or "\x00" in target:
        raise HeaderRefused(":path", "must not contain spaces, CR, LF or NUL characters")
    out = [f"{method} {target} HTTP/1.1\r\n".encode()]
    own_host = own_agent = own_encoding = False
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in _FRAMING:
            continue
        if lowered == "host":
            own_host = True
        elif lowered == "user-agent":
            own_agent = True
        elif lowered == "accept-encoding":
            own_encoding = True
        out.append(_checked_name(name) + b": " + _checked_value(name, value) + b"\r\n")
    if not own_host:
        out.append(defaults.host)
    if not own_agent:
        out.append(defaults.agent)
    if not own_encoding:
        out.append(defaults.encoding)
    if length or method not in _BODYLESS:
        out.append(b"Content-Length: %d\r\n" % length)
    out.append(b"\r\n")
    return b"".join(out)
