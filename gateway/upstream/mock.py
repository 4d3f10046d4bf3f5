"""A transport that answers from a function, without a socket: for tests of the pipeline, routing and steps.

    from gateway.upstream.mock import MockResponse, MockTransport

    def provider(request: UpstreamRequest) -> MockResponse:
        if request.url.endswith("/chat/completions"):
            return MockResponse(200, {"content-type": "application/json"}, json={"choices": [...]})
        return MockResponse(404, json={"error": {"message": "no such route"}})

    transport = MockTransport(provider)
    runtime.exchange.transport = transport   # every request-path upstream call (and /v1/models) answers from it
    ...
    assert transport.requests[0].headers["authorization"] == "Bearer sk-test"

The handler gets the ``UpstreamRequest`` as the gateway would send it (URL, headers with the forwarded ones merged,
body) and returns a ``MockResponse`` (or an awaitable of one: a handler may wait, as a slow upstream would). A
response's body is one bytes or a list of pieces read one by one, as a stream arrives; ``fail`` is raised once the
pieces are read (a ``TimeoutError`` is a read timeout, a ``ConnectionError`` a broken connection). The transport
keeps every request it was sent (``requests``) and every response it gave (``responses``: whether each was released
or closed).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import msgspec

from gateway.http.errors import UpstreamTimeout, UpstreamUnreachable
from gateway.upstream.client import answer_too_large, failure_text
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse, UpstreamTransport

#: the bound on a whole answer when the test sets none (GATEWAY_MAX_UPSTREAM_BODY_BYTES's default)
DEFAULT_MAX_BYTES = 10 * 1024 * 1024


class MockHeaders(Mapping[str, str]):
    """Response headers whose names are looked up case-insensitively."""

    __slots__ = ("_items",)

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self._items = {name.lower(): value for name, value in (headers or {}).items()}

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class MockResponse(UpstreamResponse):
    """One answer of a ``MockTransport``: a status, headers and a body (``json`` encodes one and sets its content
    type); ``pieces`` arrive one read at a time; ``fail`` is raised after them."""

    __slots__ = ("status", "_headers", "_pieces", "fail", "max_bytes", "released", "closed", "host")

    read_errors = (TimeoutError, ConnectionError)

    def __init__(self, status: int = 200, headers: Mapping[str, str] | None = None, body: bytes = b"", *,
                 json: Any = None, pieces: list[bytes] | None = None, fail: BaseException | None = None) -> None:
        headers = dict(headers or {})
        if json is not None:
            body = msgspec.json.encode(json)
            headers.setdefault("content-type", "application/json")
        self.status = status
        self._headers = MockHeaders(headers)
        self._pieces = list(pieces) if pieces is not None else ([body] if body else [])
        self.fail = fail
        self.max_bytes = DEFAULT_MAX_BYTES
        self.released = False
        self.closed = False
        self.host = "mock"

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    async def read_some(self) -> bytes:
        if self._pieces:
            return self._pieces.pop(0)
        if self.fail is not None:
            fail, self.fail = self.fail, None
            raise fail
        return b""

    async def read_body(self) -> bytes:
        size = 0
        chunks: list[bytes] = []
        try:
            while chunk := await self.read_some():
                size += len(chunk)
                if size > self.max_bytes:
                    self.close()
                    raise answer_too_large(self.host, self.max_bytes)
                chunks.append(chunk)
        except TimeoutError:
            raise UpstreamTimeout(f"timed out reading from upstream {self.host}") from None
        except ConnectionError as exc:
            raise UpstreamUnreachable(f"upstream {self.host} {failure_text(exc)}") from exc
        return b"".join(chunks)

    async def chunks(self, size: int = 0) -> AsyncIterator[bytes]:
        while chunk := await self.read_some():  # the pieces as given, whatever ``size``
            yield chunk

    def release(self) -> None:
        self.released = True

    def close(self) -> None:
        self.closed = True

    @staticmethod
    def failure_text(exc: BaseException) -> str:
        return failure_text(exc)


Handler = Callable[[UpstreamRequest], "MockResponse | Awaitable[MockResponse]"]


class MockTransport(UpstreamTransport):
    """Answers every upstream call with ``handler(request)`` (see the module docstring)."""

    def __init__(self, handler: Handler, max_answer_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.handler = handler
        self.max_answer_bytes = max_answer_bytes
        self.requests: list[UpstreamRequest] = []
        self.responses: list[MockResponse] = []

    async def open(self, req: UpstreamRequest, stream: bool = False) -> MockResponse:
        self.requests.append(req)
        answer = self.handler(req)
        response = await answer if inspect.isawaitable(answer) else answer
        assert isinstance(response, MockResponse), "a MockTransport handler returns a MockResponse"
        response.max_bytes = self.max_answer_bytes
        response.host = req.url.split("://", 1)[-1].split("/", 1)[0]
        self.responses.append(response)
        return response

    async def check(self, url: str) -> None:
        return None
