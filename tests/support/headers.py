"""The headers a test sends to route one request through the gateway: to a provider at a custom host (a mock
scenario), or by an inline config."""

from __future__ import annotations

import msgspec

from tests.support.servers import ADMIN_KEY


def headers_for(custom_host: str | None = None, provider: str = "vendorA", token: str = "sk-test", *,
                config: dict | None = None, key: str = ADMIN_KEY, trace_id: str | None = None,
                **extra: str) -> dict[str, str]:
    """Gateway key plus either ``config`` (``x-gateway-config``) or provider, custom host and bearer ``token``;
    ``trace_id`` sets ``x-gateway-trace-id``; ``extra`` headers are added last."""
    headers = {"x-gateway-api-key": key}
    if config is not None:
        headers.update({"x-gateway-config": msgspec.json.encode(config).decode(), "content-type": "application/json"})
    else:
        assert custom_host is not None, "a custom host or a config"
        headers.update({"x-gateway-provider": provider, "x-gateway-custom-host": custom_host,
                        "authorization": f"Bearer {token}", "content-type": "application/json"})
    if trace_id is not None:
        headers["x-gateway-trace-id"] = trace_id
    headers.update(extra)
    return headers
