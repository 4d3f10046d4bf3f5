"""cloudC (Gemini on a regional AI platform): URLs, auth, and dispatch to the Gemini and embeddings mappings.

Base ``https://{region}-aiplatform.googleapis.com/v1`` (``https://aiplatform.googleapis.com/v1`` for the ``global``
location); ``custom_host`` replaces it. Paths:

- chat: ``/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent``, or
  ``:streamGenerateContent?alt=sse`` for a stream (server-sent events, one GenerateContentResponse per event);
- embeddings: ``.../models/{model}:predict``;
- image generations (Imagen models): ``.../models/{model}:predict`` too (``imagen``: the translation).

``project`` and ``region`` come from ``cloudC_project_id`` / ``cloudC_region`` (config, or the
``x-gateway-cloudC-project-id`` / ``-region`` headers); the project falls back to the service account's
``project_id``. Auth is ``Authorization: Bearer`` with either the given token (``api_key``, e.g. from the client's
``Authorization``) or an access token obtained for ``cloudC_service_account_json`` (see ``auth``). The
``X-cloudC-LLM-Request-Type`` client header is sent as the platform's ``X-Vertex-AI-LLM-Request-Type`` header
(``dedicated`` / ``shared`` provisioned-throughput choice).
"""

from __future__ import annotations

import re
from typing import Any

from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import (
    CHAT,
    EMBEDDINGS,
    IMAGES_GENERATIONS,
    ProviderAdapter,
    UpstreamCall,
    UpstreamResult,
)
from gateway.providers.cloudC import embeddings, gemini, imagen
from gateway.providers.cloudC.auth import TokenCache
from gateway.providers.cloudC.stream import GeminiStream
from gateway.upstream.client import UpstreamClient
from gateway.upstream.request import UpstreamRequest

__all__ = ["CloudCAdapter"]

NAME = "cloudC"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")
_METHODS = {(CHAT, False): ":generateContent", (CHAT, True): ":streamGenerateContent?alt=sse",
            (EMBEDDINGS, False): ":predict", (EMBEDDINGS, True): ":predict",
            (IMAGES_GENERATIONS, False): ":predict", (IMAGES_GENERATIONS, True): ":predict"}


def _segment(value: Any, field: str, what: str) -> str:
    if not value or not isinstance(value, str):
        raise InvalidRequest(f"cloudC needs {field} ({what})", param=field)
    if not _SAFE.match(value):
        raise InvalidRequest(f"{field} {value!r} may hold only letters, digits, '.', '_', '@' and '-'", param=field)
    return value


class CloudCAdapter(ProviderAdapter):
    """cloudC adapter; holds the service-account token cache (closed at shutdown)."""

    name = NAME
    endpoints = frozenset({CHAT, EMBEDDINGS, IMAGES_GENERATIONS})
    relays_media = False
    fields = {CHAT: gemini.CHAT_FIELDS, EMBEDDINGS: embeddings.FIELDS}

    def __init__(self, tokens: TokenCache) -> None:
        self.tokens = tokens

    @classmethod
    def create(cls, client: UpstreamClient) -> CloudCAdapter:
        return cls(TokenCache(client))

    def url(self, call: UpstreamCall) -> str:
        target = call.target
        region = _segment(target.cloudC_region, "cloudC_region",
                          "the location, e.g. us-central1; or send x-gateway-cloudC-region")
        project = target.cloudC_project_id
        account = target.cloudC_service_account_json
        if not project and isinstance(account, dict):
            project = account.get("project_id")
        project = _segment(project, "cloudC_project_id", "the project id; or send x-gateway-cloudC-project-id")
        model = _segment(call.model, "model", "the publisher model to call, e.g. gemini-2.0-flash")
        base = target.custom_host
        if not base:
            host = "aiplatform.googleapis.com" if region == "global" else f"{region}-aiplatform.googleapis.com"
            base = f"https://{host}/v1"
        return (f"{base.rstrip('/')}/projects/{project}/locations/{region}/publishers/google/models/{model}"
                f"{_METHODS[(call.endpoint, call.stream)]}")

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        target = call.target
        url = self.url(call)
        if call.endpoint == CHAT:
            body = gemini.build_request(call.request)
        elif call.endpoint == IMAGES_GENERATIONS:
            body = imagen.build_request(call.body)
        else:
            body = embeddings.build_request(call.body)
        if target.cloudC_service_account_json is not None:
            token = await self.tokens.token(target.cloudC_service_account_json)
        elif target.api_key:
            token = target.api_key
        else:
            raise InvalidRequest(
                "cloudC needs an access token (Authorization: Bearer, or api_key) or cloudC_service_account_json",
                param="api_key",
            )
        headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        request_type = call.ctx.cloudC_llm_request_type
        if request_type:
            headers["x-vertex-ai-llm-request-type"] = request_type
        return UpstreamRequest(url, headers, body)

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        if call.endpoint == EMBEDDINGS:
            out, usage = embeddings.parse_response(body, call.body)
            return UpstreamResult(out, usage, call.model)
        if call.endpoint == IMAGES_GENERATIONS:
            return UpstreamResult(imagen.parse_response(body), None, call.model)
        out, usage, model = gemini.parse_response(body, call.model, self._thoughts(call), headers)
        return UpstreamResult(out, usage, model)

    def parse_error(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> GatewayError:
        return gemini.google_error(status, body, headers)

    def stream(self, call: UpstreamCall) -> GeminiStream:
        options = getattr(call.request, "stream_options", None)
        include_usage = bool(options is not None and options.include_usage)
        return GeminiStream(call.model, include_usage, self._thoughts(call))

    @staticmethod
    def _thoughts(call: UpstreamCall) -> bool:
        """Thought parts are returned only when strict_vendorA_compliance is explicitly false."""
        return call.target.strict_vendorA_compliance is False

