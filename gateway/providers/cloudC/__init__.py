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

The Messages API door forwards to cloudC's anthropic models (``claude-…``) in anthropic's own body, as the platform's
"Claude on Vertex AI" guide describes: ``.../publishers/anthropic/models/{model}:rawPredict`` (``:streamRawPredict``
for a stream, whose SSE events are anthropic's), the body without ``model`` and with ``anthropic_version:
vertex-2023-10-16``; a token count goes to ``.../publishers/anthropic/models/count-tokens:rawPredict`` with
``model`` kept.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import (
    CHAT,
    EMBEDDINGS,
    IMAGES_GENERATIONS,
    MESSAGES,
    MESSAGES_COUNT,
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
#: the ``anthropic_version`` body member of anthropic models on the platform
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
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

    def serves(self, endpoint: str, model: str | None) -> bool:
        if endpoint in (MESSAGES, MESSAGES_COUNT):
            return model is not None and model.startswith("claude")
        return endpoint in self.endpoints

    async def forward_request(self, call: UpstreamCall, path: str) -> UpstreamRequest:
        """The Messages door's body for an anthropic model (see the module docstring)."""
        doc = msgspec.json.decode(call.body)
        counting = call.endpoint == MESSAGES_COUNT
        if not counting:
            doc.pop("model", None)
            doc["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        model = "count-tokens" if counting else call.model
        method = ":rawPredict" if counting or not call.stream else ":streamRawPredict"
        url = self._model_url(call.target, "anthropic", model) + method
        headers = await self._headers(call)
        return UpstreamRequest(url, headers, msgspec.json.encode(doc))

    def url(self, call: UpstreamCall) -> str:
        return self._model_url(call.target, "google", call.model) + _METHODS[(call.endpoint, call.stream)]

    def _model_url(self, target: Any, publisher: str, model: str | None) -> str:
        region = _segment(target.cloudC_region, "cloudC_region",
                          "the location, e.g. us-central1; or send x-gateway-cloudC-region")
        project = target.cloudC_project_id
        account = target.cloudC_service_account_json
        if not project and isinstance(account, dict):
            project = account.get("project_id")
        project = _segment(project, "cloudC_project_id", "the project id; or send x-gateway-cloudC-project-id")
        model = _segment(model, "model", "the publisher model to call, e.g. gemini-2.0-flash")
        base = target.custom_host
        if not base:
            host = "aiplatform.googleapis.com" if region == "global" else f"{region}-aiplatform.googleapis.com"
            base = f"https://{host}/v1"
        return f"{base.rstrip('/')}/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}"

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        url = self.url(call)
        if call.endpoint == CHAT:
            body = gemini.build_request(call.request)
        elif call.endpoint == IMAGES_GENERATIONS:
            body = imagen.build_request(call.body)
        else:
            body = embeddings.build_request(call.body)
        return UpstreamRequest(url, await self._headers(call), body)

    async def _headers(self, call: UpstreamCall) -> dict[str, str]:
        """The JSON content type, the bearer token and the request-type header."""
        target = call.target
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
        return headers

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

