"""``GET /metrics``: Prometheus text exposition, for a root key with the ``metrics.read`` scope unless
``GATEWAY_METRICS_PUBLIC=1``.

The series sum every workspace's traffic, so a workspace's own admin key (like a member key) gets 403: only an
organisation-wide root key (``GATEWAY_ADMIN_KEY``, the generated bootstrap key, or one made with
``gateway keys create --root``) reads them. The key is presented as on every route (``gateway.controlplane.auth``).
"""

from __future__ import annotations

import asyncio

from gateway.controlplane.auth import authenticate
from gateway.controlplane.keys import KeyStore
from gateway.http.context import build_context
from gateway.http.respond import send_bytes
from gateway.http.types import Receive, Scope, Send


class MetricsEndpoint:
    def __init__(self, keys: KeyStore, public: bool) -> None:
        """``public``: ``GATEWAY_METRICS_PUBLIC`` (no key needed)."""
        self.keys = keys
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.public:
            await authenticate(self.keys, build_context(scope["headers"]), "metrics.read", root=True)
        from gateway.observability import metrics

        body = await asyncio.to_thread(metrics.render)
        await send_bytes(send, 200, body, [(b"content-type", metrics.CONTENT_TYPE.encode())])
