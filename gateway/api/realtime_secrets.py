"""``POST /v1/realtime/client_secrets``: a server mints a short-lived, single-use secret a browser opens one Realtime
session with (docs/websockets.md#client-secrets; the grant and its rules: ``gateway/realtime/secrets.py``).

The caller authenticates with its gateway key (scope ``inference``) and names the provider as a session would, by a
provider slug (``x-gateway-provider: @slug``) or a saved config id (``x-gateway-config: <id>``): names only, so the
provider key stays in the gateway's records and never in the store beside the secret. The named config must send
sessions to a provider with a Realtime API (400 otherwise), checked now rather than when the browser connects.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.config.resolve import ConfigResolver
from gateway.controlplane.auth import authenticate
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import KeyStore
from gateway.http.body import read_request_body
from gateway.http.context import build_context
from gateway.http.errors import InvalidRequest
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.realtime.endpoint import first_target, session_config
from gateway.realtime.secrets import DEFAULT_SECONDS, ClientSecrets, parse_mint
from gateway.realtime.target import PROVIDERS
from gateway.routing.plan import Planner

SCOPE = "inference"
_encode = msgspec.json.encode


class ClientSecretsEndpoint:
    def __init__(self, keys: KeyStore, records: RecordCache, resolver: ConfigResolver, planner: Planner,
                 secrets: ClientSecrets, max_body: int) -> None:
        self.keys = keys
        self.records = records
        self.resolver = resolver
        self.planner = planner
        self.secrets = secrets
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ctx = build_context(scope["headers"])
        key = await authenticate(self.keys, ctx, SCOPE)
        request = parse_mint(await read_request_body(scope, receive, self.max_body))
        provider, config_id = ctx.provider, ctx.config
        if config_id and config_id.lstrip().startswith("{") or provider and not provider.startswith("@") or \
                not (provider or config_id):
            raise InvalidRequest("a client secret names its provider by a provider slug (x-gateway-provider: @slug) "
                                 "or a saved config id (x-gateway-config: <id>), so no provider key is stored with it",
                                 param="x-gateway-provider")
        if ctx.custom_host or ctx.bearer or ctx.virtual_key or ctx.has_cloud_headers:
            raise InvalidRequest("a client secret takes its provider settings from the slug or saved config only; "
                                 "drop x-gateway-custom-host, the cloud headers and the bearer", param="headers")
        leaf = first_target(self.planner.plan(await session_config(self.resolver, self.records, ctx)))
        if leaf.provider not in PROVIDERS:
            raise InvalidRequest(f"provider '{leaf.provider}' has no Realtime API through the gateway; realtime "
                                 f"sessions go to {' or '.join(PROVIDERS)}", param="provider")
        session = request.session
        model = session.model if session is not None else None
        seconds = request.expires_after.seconds if request.expires_after is not None else DEFAULT_SECONDS
        assert ctx.api_key is not None  # authenticate took the key (header or bearer) onto the context
        value, expires_at = await self.secrets.mint(ctx.api_key, key.workspace, provider, config_id, model, seconds)
        answer: dict[str, Any] = {"object": "realtime.client_secret", "value": value, "expires_at": expires_at,
                                  "session": {"type": "realtime", "model": model}}
        await send_json(send, 200, _encode(answer))
