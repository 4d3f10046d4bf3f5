"""``GET /metrics``: Prometheus text exposition, for the root key (``x-gateway-api-key`` or ``Authorization: Bearer``)
unless ``GATEWAY_METRICS_PUBLIC=1``.

The series sum every workspace's traffic, so a workspace's own admin key (like a member key) gets 403: only the
organisation-wide root key (``GATEWAY_ADMIN_KEY``, the generated bootstrap key, or one made with
``gateway keys create --root``) reads them."""

from __future__ import annotations

import asyncio

from gateway.controlplane.keys import KeyStore
from gateway.http.errors import Forbidden, Unauthorized
from gateway.http.respond import send_bytes
from gateway.http.types import RawHeaders, Receive, Scope, Send


def _presented_key(headers: RawHeaders) -> str | None:
    bearer = None
    for name, value in headers:
        lower = name.lower()
        if lower == b"x-gateway-api-key":
            return value.decode("latin-1").strip()
        if lower == b"authorization" and value[:7].lower() == b"bearer ":
            bearer = value[7:].decode("latin-1").strip()
    return bearer


class MetricsEndpoint:
    def __init__(self, keys: KeyStore, public: bool) -> None:
        """``public``: ``GATEWAY_METRICS_PUBLIC`` (no key needed)."""
        self.keys = keys
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.public:
            key = _presented_key(scope["headers"])
            if not key:
                raise Unauthorized("missing admin key: send x-gateway-api-key or Authorization: Bearer",
                                   param="x-gateway-api-key")
            record = await self.keys.lookup(key)
            if record is None:
                raise Unauthorized("unknown gateway key", param="x-gateway-api-key")
            if not record.root:
                raise Forbidden("/metrics shows every workspace's traffic: it needs the root admin key "
                                "(GATEWAY_ADMIN_KEY or a key made with gateway keys create --root)",
                                param="x-gateway-api-key")
        from gateway.observability import metrics

        body = await asyncio.to_thread(metrics.render)
        await send_bytes(send, 200, body, [(b"content-type", metrics.CONTENT_TYPE.encode())])
