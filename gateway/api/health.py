"""``GET /health`` (liveness: version, state store, which speedups are compiled) and ``GET /ready`` (200 while the
worker's runtime serves, 503 before it started, while it shuts down and, with ``state_fail_mode`` closed, while the
state store is unreachable)."""

from __future__ import annotations

import msgspec

from gateway import __version__, _speedups
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.runtime import Runtime

_encode = msgspec.json.encode


class HealthEndpoint:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self.runtime
        body = _encode({
            "status": "ok",
            "version": __version__,
            "state_backend": runtime.store.backend,
            "state": {"backend": runtime.store.backend, "healthy": runtime.store.healthy,
                      "fail_mode": runtime.settings.state_fail_mode},
            "speedups": _speedups.active(),
            "log_store": runtime.recorder.log_store_health() if hasattr(runtime.recorder, "log_store_health") else None,
        })
        await send_json(send, 200, body)


class ReadyEndpoint:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ok = self.runtime.ready and self.runtime.state_ready
        await send_json(send, 200 if ok else 503, _encode({"ready": ok}))
