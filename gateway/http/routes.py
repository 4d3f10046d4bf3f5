"""The route table: (method, path) -> handler, exact paths in one dict lookup, ``{name}`` segments after them.

Exact paths (every inference route) are found with one dictionary lookup. Paths with parameters
(``/v1/prompts/{prompt_id}/render``) are matched segment by segment only when no exact route matched; the values
are handed to the handler in ``scope["path_params"]``. A parameter matches one non-empty segment; a path with a
trailing slash is a different path (404), never a near match.
"""

from __future__ import annotations

from gateway.http.types import ASGIApp

Handler = ASGIApp  # ``await handler(scope, receive, send)``


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
        """Register ``handler`` for ``method`` on ``path``; a ``{name}`` segment is a path parameter."""
        if "{" in path:
            pattern = self._patterns.get(path)
            if pattern is None:
                pattern = self._patterns[path] = _Pattern(path)
            pattern.methods[method] = handler
        else:
            self._exact[(method, path)] = handler
            self._exact_methods.setdefault(path, []).append(method)

    def routes(self) -> list[tuple[str, str]]:
        """Every ``(method, path)`` routed, ``{name}`` segments as written (for tests and tools, not requests)."""
        listed = list(self._exact)
        for path, pattern in self._patterns.items():
            listed.extend((method, path) for method in pattern.methods)
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
