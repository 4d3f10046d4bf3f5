"""``GET /health`` (liveness: version, state store, which speedups are compiled) and ``GET /ready`` (200 while the
worker's runtime serves, 503 before it started, while it shuts down and, with ``state_fail_mode`` closed, while the
state store is unreachable)."""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway import __version__
from gateway._speedups import context_in_use, sse_in_use
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.observability import recordrow_in_use
from gateway.routing import conditions_in_use
from gateway.state.base import StateStore
from gateway.upstream import head_in_use

_encode = msgspec.json.encode


def speedups() -> dict[str, str]:
    """Each compiled kernel (one per ``_speedups/<name>.pyx``, which a test checks) -> "compiled" or "pure": what the
    module naming its twins chose at import. The similarity kernel's module belongs to the semantic cache, which a
    worker imports only when a request first uses it: it is imported here at the first ``/health``, not when the
    worker starts (a worker that serves no cached request never loads the cache package)."""
    from gateway.cache import similarity_in_use  # lazily, as the semantic cache itself is (see the docstring)

    return {
        "sse": sse_in_use.IMPLEMENTATION,
        "conditions": conditions_in_use.IMPLEMENTATION,
        "similarity": similarity_in_use.IMPLEMENTATION,
        "recordrow": recordrow_in_use.IMPLEMENTATION,
        "context": context_in_use.IMPLEMENTATION,
        "head": head_in_use.IMPLEMENTATION,
    }


class HealthEndpoint:
    def __init__(self, store: StateStore, fail_mode: str,
                 log_store: Callable[[], dict[str, Any]] | None = None) -> None:
        """``fail_mode``: ``GATEWAY_STATE_FAIL_MODE``, shown beside the store's health; ``log_store``: what the
        request-log store says of its health (None: not shown)."""
        self.store = store
        self.fail_mode = fail_mode
        self.log_store = log_store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        store = self.store
        body = _encode({
            "status": "ok",
            "version": __version__,
            "state_backend": store.backend,
            "state": {"backend": store.backend, "healthy": store.healthy, "fail_mode": self.fail_mode},
            "speedups": speedups(),
            "log_store": self.log_store() if self.log_store is not None else None,
        })
        await send_json(send, 200, body)


class ReadyEndpoint:
    def __init__(self, ready: Callable[[], bool]) -> None:
        """``ready()``: whether the worker serves now (started, not shutting down, its state store usable)."""
        self.ready = ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ok = self.ready()
        await send_json(send, 200 if ok else 503, _encode({"ready": ok}))
