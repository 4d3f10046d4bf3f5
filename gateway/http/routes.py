"""The route table: (method, path) -> handler, exact paths in one dict lookup, ``{name}`` segments after them.

Exact paths (every inference route) are found with one dictionary lookup. Paths with parameters
(``/v1/prompts/{prompt_id}/render``) are matched segment by segment only when no exact route matched; the values
are handed to the handler in ``scope["path_params"]``. A parameter matches one non-empty segment; to this table
a path with a trailing slash is a different path, never a near match (the app asks again without the slashes, so
the gateway serves ``/v1/chat/completions/`` as ``/v1/chat/completions``: ``App._route``).

Every ``GET`` route answers ``HEAD`` too (``HeadOf``): the GET's status and headers, no body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gateway.http.errors import GatewayError, internal_error
from gateway.http.respond import CACHE_DISABLED, send_error
from gateway.http.types import ASGIApp, Message, Receive, Scope, Send

Handler = ASGIApp  # ``await handler(scope, receive, send)``


class Deferred:
    """A route whose handler is built on its first request (``build`` imports what it needs then), so a worker that
    never serves the route never loads its modules."""

    __slots__ = ("build", "handler")

    def __init__(self, build: Callable[[], Handler]) -> None:
        self.build = build
        self.handler: Handler | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handler
        if handler is None:
            handler = self.handler = self.build()
        await handler(scope, receive, send)


class _Answered(Exception):
    """The HEAD answer is out: raised from ``send`` to stop the GET handler that made it."""


def _sized_or_stream(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-length" or (name == b"content-type" and value.startswith(b"text/event-stream")):
            return True
    return False


class HeadOf:
    """``HEAD`` of a GET route: the GET handler runs as for a GET and the client gets its status and headers
    (``content-length`` the GET's body's, when the GET sends its body in one piece) without the body.

    A streamed GET (``text/event-stream``, or a body in several pieces) is answered as soon as its head is known,
    without a length; the handler is then stopped, so a HEAD of an endless stream does not hang.
    """

    __slots__ = ("get",)

    def __init__(self, get: Handler) -> None:
        self.get = get

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        held: list[Message] = []
        done = False

        async def head_send(message: Message) -> None:
            nonlocal done
            if done:
                raise _Answered
            kind = message["type"]
            if kind == "http.response.start":
                if not _sized_or_stream(message.get("headers") or ()):
                    held.append(message)
                    return
                start = message
            elif kind == "http.response.body" and held:
                start = held.pop()
                if not message.get("more_body", False):
                    length = str(len(message.get("body", b""))).encode()
                    start = {**start, "headers": [*(start.get("headers") or ()), (b"content-length", length)]}
            else:
                await send(message)
                return
            done = True
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            raise _Answered

        try:
            await self.get({**scope, "method": "GET"}, receive, head_send)
            return
        except _Answered:
            return
        except GatewayError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - the one error format, as the app writes it for a GET
            error = internal_error(exc)
        try:
            await send_error(head_send, error, [CACHE_DISABLED])
        except _Answered:
            pass


class _Pattern:
    __slots__ = ("segments", "names", "methods")

    def __init__(self, path: str) -> None:
        self.segments: tuple[str | None, ...] = tuple(
            None if part.startswith("{") and part.endswith("}") else part for part in path.strip("/").split("/")
        )
        self.names = tuple(part[1:-1] for part in path.strip("/").split("/") if part.startswith("{"))
        self.methods: dict[str, Handler] = {}

    def match(self, parts: list[str]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        values = []
        for want, got in zip(self.segments, parts):
            if want is None:
                if not got:
                    return None
                values.append(got)
            elif want != got:
                return None
        return dict(zip(self.names, values))


class RouteTable:
    """Routes by method and path; ``match`` answers the handler and its path parameters."""

    def __init__(self) -> None:
        self._exact: dict[tuple[str, str], Handler] = {}
        self._exact_methods: dict[str, list[str]] = {}
        self._patterns: dict[str, _Pattern] = {}

    def add(self, method: str, path: str, handler: Handler) -> None:
        """Register ``handler`` for ``method`` on ``path``; a ``{name}`` segment is a path parameter. A ``GET``
        route answers ``HEAD`` too."""
        if method == "GET":
            self.add("HEAD", path, HeadOf(handler))
        if "{" in path:
            pattern = self._patterns.get(path)
            if pattern is None:
                pattern = self._patterns[path] = _Pattern(path)
            pattern.methods[method] = handler
        else:
            self._exact[(method, path)] = handler
            self._exact_methods.setdefault(path, []).append(method)

    def routes(self) -> list[tuple[str, str]]:
        """Every ``(method, path)`` routed, ``{name}`` segments as written (for tests and tools, not requests);
        the ``HEAD`` every GET route answers is not listed."""
        listed = [route for route in self._exact if route[0] != "HEAD"]
        for path, pattern in self._patterns.items():
            listed.extend((method, path) for method in pattern.methods if method != "HEAD")
        return listed

    def exact(self, method: str, path: str) -> Handler | None:
        """The handler of an exact route (the hot path: one dict lookup)."""
        return self._exact.get((method, path))

    def match(self, method: str, path: str) -> tuple[Handler | None, dict[str, str] | None, list[str]]:
        """``(handler, path_params, allowed_methods)``: handler None with methods = wrong method; with none =
        no such path."""
        handler = self._exact.get((method, path))
        if handler is not None:
            return handler, None, []
        methods = self._exact_methods.get(path)
        if methods:
            return None, None, sorted(methods)
        parts = path[1:].split("/") if path.startswith("/") else path.split("/")
        allowed: list[str] = []
        for pattern in self._patterns.values():
            params = pattern.match(parts)
            if params is None:
                continue
            handler = pattern.methods.get(method)
            if handler is not None:
                return handler, params, []
            allowed.extend(pattern.methods)
        return None, None, sorted(set(allowed))
