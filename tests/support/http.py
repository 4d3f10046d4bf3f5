"""Minimal raw HTTP for tests (http.client): exact status, headers and bytes, streamed or not. A URL under an
in-process gateway's base goes to its app instead (``tests/support/mounts.py``)."""

from __future__ import annotations

import http.client
from typing import Any, Iterator
from urllib.parse import urlsplit

import msgspec

from tests.support.mounts import mounted


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes,
                 header_list: list[tuple[str, str]] | None = None) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        #: every header as received, repeats kept (``headers`` keeps the last of each name)
        self.header_list = header_list or list(headers.items())

    def all(self, name: str) -> list[str]:
        """Every value of a header, in order."""
        return [v for k, v in self.header_list if k == name.lower()]

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


def _conn(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return conn, path


def request(method: str, url: str, body: bytes | str | dict | None = None, headers: dict[str, str] | None = None,
            timeout: float = 60.0) -> Response:
    in_process = mounted(url)
    if in_process is not None:
        return in_process.request(method, url, body, headers, timeout)
    if isinstance(body, dict):
        body = msgspec.json.encode(body)
    elif isinstance(body, str):
        body = body.encode()
    conn, path = _conn(url, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        pairs = [(k.lower(), v) for k, v in resp.getheaders()]
        return Response(resp.status, dict(pairs), data, pairs)
    finally:
        conn.close()


def post(url: str, body: bytes | str | dict | None, headers: dict[str, str] | None = None,
         timeout: float = 60.0) -> Response:
    return request("POST", url, body, headers, timeout)


def stream_events(url: str, body: dict, headers: dict[str, str], timeout: float = 60.0
                  ) -> tuple[int, dict[str, str], Iterator[bytes]]:
    """POST and iterate the raw SSE ``data:`` payloads as they arrive."""
    in_process = mounted(url)
    if in_process is not None:
        return in_process.stream_events(url, body, headers, timeout)
    conn, path = _conn(url, timeout)
    conn.request("POST", path, body=msgspec.json.encode(body), headers=headers)
    resp = conn.getresponse()
    resp_headers = {k.lower(): v for k, v in resp.getheaders()}

    def events() -> Iterator[bytes]:
        try:
            for raw in resp:
                line = raw.rstrip(b"\r\n")
                if line.startswith(b"data: "):
                    yield line[6:]
        finally:
            conn.close()

    return resp.status, resp_headers, events()
