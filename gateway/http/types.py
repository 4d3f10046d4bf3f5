"""The ASGI types, defined once: a scope, the messages, and the receive and send callables that carry them."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, MutableMapping

#: The connection scope the server hands the app (``type``, ``method``, ``path``, ``headers``...).
Scope = MutableMapping[str, Any]
#: One ASGI event (``http.request``, ``http.response.start``, ``lifespan.startup``...).
Message = MutableMapping[str, Any]
#: Awaits the next event from the server.
Receive = Callable[[], Awaitable[Message]]
#: Hands one event to the server.
Send = Callable[[Message], Awaitable[None]]
#: An ASGI application, and every route handler the app dispatches to.
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: A header list as ASGI carries it: lower-case names and values, both bytes.
RawHeaders = list[tuple[bytes, bytes]]
