"""The cloudA provider (Converse / ConverseStream): URL, SigV4-signed headers, and the answer turned back.

Facts relied on (AWS's public Bedrock Runtime API reference and endpoint list): the runtime endpoint is
``https://bedrock-runtime.{region}.amazonaws.com``; ``POST /model/{modelId}/converse`` answers JSON and
``POST /model/{modelId}/converse-stream`` answers ``application/vnd.amazon.eventstream``; the model id is a URI
path label, so ``:`` and ``/`` in it travel percent-encoded (``%3A``, ``%2F``); requests are signed with SigV4 under
the signing name ``bedrock``.

Credentials come from the target config (``cloudA_access_key_id``, ``cloudA_secret_access_key``, optional
``cloudA_session_token``; the ``x-gateway-cloudA-*`` headers fill them); ``cloudA_region`` defaults to
``us-east-1``. A ``custom_host`` replaces the base URL and the same path is appended; the Host header and the path
are signed exactly as sent (the port is kept when it is not the scheme's default).

The Messages API door forwards to cloudA's anthropic models (ids holding ``anthropic.``) through InvokeModel in
anthropic's own body (``invoke``).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.bounded_cache import BoundedCache
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import CHAT, MESSAGES, ProviderAdapter, UpstreamCall, UpstreamResult
from gateway.providers.cloudA import converse, sigv4
from gateway.providers.cloudA.invoke import InvokeStreamToSse, invoke_body
from gateway.providers.cloudA.stream import ConverseStream
from gateway.providers.structured_output import output_tool_name
from gateway.upstream.request import UpstreamRequest

DEFAULT_REGION = "us-east-1"
SERVICE = "bedrock"
_REGION = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_JSON = {"content-type": "application/json"}

__all__ = ["CloudAAdapter", "DEFAULT_REGION", "SERVICE"]


def _host(url: str) -> tuple[str, str]:
    """(the Host header value for ``url``, its path) — the port kept unless it is the scheme's default."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host, parts.path


class CloudAAdapter(ProviderAdapter):
    """cloudA chat through Converse; stateless apart from a small URL cache."""

    name = "cloudA"
    endpoints = frozenset({CHAT})
    fields = {CHAT: converse.CHAT_FIELDS}

    def __init__(self) -> None:
        self._urls: BoundedCache[tuple[str | None, str, str, bool, str], tuple[str, str, str]] = BoundedCache(4096)
        #: derived signing keys and the current timestamp, kept per adapter (bounded)
        self.signer = sigv4.Signer()

    def endpoint(self, custom_host: str | None, region: str, model: str, stream: bool,
                 action: tuple[str, str] = ("converse", "converse-stream")) -> tuple[str, str, str]:
        """(URL, Host header, path as sent) for one model and action (plain, streamed)."""
        key = (custom_host, region, model, stream, action[0])
        hit = self._urls.get(key)
        if hit is None:
            base = (custom_host or f"https://bedrock-runtime.{region}.amazonaws.com").rstrip("/")
            url = f"{base}/model/{quote(model, safe='')}/{action[1] if stream else action[0]}"
            host, path = _host(url)
            hit = self._urls.put(key, (url, host, path))
        return hit

    def serves(self, endpoint: str, model: str | None) -> bool:
        if endpoint == MESSAGES:  # anthropic models take anthropic's body through InvokeModel
            return model is not None and "anthropic." in model
        return endpoint in self.endpoints

    async def forward_request(self, call: UpstreamCall, path: str) -> UpstreamRequest:
        body = invoke_body(call.body)
        url, host, signed_path, credentials, region = self._target(call, ("invoke", "invoke-with-response-stream"))
        headers = self.signer.sign("POST", host, signed_path, body, credentials, region, SERVICE, headers=_JSON)
        headers["accept"] = "application/vnd.amazon.eventstream" if call.stream else "application/json"
        return UpstreamRequest(url, headers, body)

    def forward_decoder(self, call: UpstreamCall) -> InvokeStreamToSse:
        return InvokeStreamToSse(self.name)

    def _target(self, call: UpstreamCall, action: tuple[str, str] = ("converse", "converse-stream")
                ) -> tuple[str, str, str, sigv4.Credentials, str]:
        """(URL, Host header, signed path, credentials, region) of one call, its config checked."""
        target = call.target
        if not target.cloudA_access_key_id:
            raise InvalidRequest("cloudA_access_key_id is required for provider cloudA", param="cloudA_access_key_id")
        if not target.cloudA_secret_access_key:
            raise InvalidRequest(
                "cloudA_secret_access_key is required for provider cloudA", param="cloudA_secret_access_key"
            )
        region = target.cloudA_region or DEFAULT_REGION
        if not _REGION.match(region):
            raise InvalidRequest(f"cloudA_region {region!r} is not a region name", param="cloudA_region")
        if not call.model:
            raise InvalidRequest("model is required for provider cloudA", param="model")
        url, host, path = self.endpoint(target.custom_host, region, call.model, call.stream, action)
        credentials = sigv4.Credentials(
            target.cloudA_access_key_id, target.cloudA_secret_access_key, target.cloudA_session_token or None
        )
        return url, host, path, credentials, region

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        url, host, path, credentials, region = self._target(call)
        body = converse.build_body(call.request, call.target.strict_vendorA_compliance is False)
        headers = self.signer.sign("POST", host, path, body, credentials, region, SERVICE, headers=_JSON)
        headers["accept"] = "application/vnd.amazon.eventstream" if call.stream else "application/json"
        return UpstreamRequest(url, headers, body)

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        reasoning = call.target.strict_vendorA_compliance is False
        data, usage = converse.parse_response(self.name, body, call.model or "", reasoning,
                                              output_tool_name(call.request))
        return UpstreamResult(data, usage, call.model)

    def parse_error(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> GatewayError:
        return converse.aws_error(self.name, status, headers, body)

    def stream(self, call: UpstreamCall) -> ConverseStream:
        options = getattr(call.request, "stream_options", None)
        include_usage = bool(options is not None and options.include_usage)
        return ConverseStream(self.name, call.model or "", include_usage,
                              call.target.strict_vendorA_compliance is False, output_tool_name(call.request))
