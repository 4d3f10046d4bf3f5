"""cloudB: resource deployments (vendorA wire format under ``/openai/deployments/...``) and AI endpoints.

Two ways of addressing a model, both speaking the vendorA wire format (request bytes forwarded unchanged, answers
parsed and streamed by the vendorA adapter's code): resource deployments (``api-key`` header, ``api-version``
query) and AI endpoints (``serverless`` or ``managed``, bearer auth). Which config fields and headers pick them,
and the jobs routes forwarded on the resource form: docs/providers.md ("Provider notes") and docs/jobs.md.
``CloudBStream`` gives the chunks cloudB sends without a stream identity (the leading ``prompt_filter_results``
chunk, the asynchronous content filter's annotations) the unified chunk shape, and holds leading ones back until
the first real event, so an error that follows them is still the stream's first event.

Wire facts (public references: learn.microsoft.com/azure/ai-services/openai/reference,
learn.microsoft.com/azure/ai-studio/reference/reference-model-inference-api,
learn.microsoft.com/azure/machine-learning/how-to-authenticate-online-endpoint): the resource data-plane inference
API (``/openai/deployments/{id}/...`` with an ``api-version`` query and the ``api-key`` header; errors as
``{"error": {"code", "message"}}``; a stream may open with a chunk whose ``choices`` is empty and which carries
``prompt_filter_results``, with ``id``, ``object`` and ``model`` empty and ``created`` 0; with the asynchronous
content filter (learn.microsoft.com/azure/ai-services/openai/concepts/content-filter, "content streaming"),
annotation chunks with the same empty members carry choices with ``content_filter_results`` and
``content_filter_offsets`` and no ``delta``); the AI model inference endpoints (``*.models.ai.azure.com`` and
``*.inference.ml.azure.com`` hosts, bearer keys, ``/v1/chat/completions`` routes, the ``azureml-model-deployment``
header of managed online endpoints).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.providers.base import (
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    RESOURCES,
    UpstreamCall,
    UpstreamResult,
)
from gateway.providers.vendorA import PATHS, VendorAAdapter, VendorAStream
from gateway.schema.config import Config
from gateway.upstream.request import UpstreamRequest

NAME = "cloudB"
ENDPOINTS = frozenset({CHAT, COMPLETIONS, EMBEDDINGS}) | RESOURCES
SERVERLESS = "serverless"
MANAGED = "managed"

#: host labels and deployment ids: letters, digits, dashes, dots and underscores only (they go into URLs)
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _require(value: str | None, field: str, what: str) -> str:
    if not value:
        raise InvalidRequest(f"cloudB needs {field} ({what})", param=field)
    if not _SAFE.match(value):
        raise InvalidRequest(f"{field} {value!r} may hold only letters, digits, '.', '_' and '-'", param=field)
    return value


def pick_deployment(target: Config, model: str | None) -> tuple[str, str]:
    """The (deployment_id, api_version) for a request: by alias, else the default deployment, else the config's."""
    deployments = target.deployments
    if deployments:
        chosen = None
        if model:
            for deployment in deployments:
                if deployment.alias == model:
                    chosen = deployment
                    break
        if chosen is None:
            for deployment in deployments:
                if deployment.is_default:
                    chosen = deployment
                    break
        if chosen is None:
            raise InvalidRequest(
                f"no cloudB deployment has alias {model!r} and none is marked is_default", param="deployments"
            )
        return (
            _require(chosen.deployment_id, "deployments.deployment_id", "the deployment to call"),
            chosen.api_version,
        )
    deployment_id = _require(target.deployment_id, "deployment_id", "the deployment to call; "
                             "or send x-gateway-cloudB-deployment-id")
    api_version = target.api_version or target.cloudB_api_version
    if not api_version:
        raise InvalidRequest(
            "cloudB needs api_version (the api-version query); or send x-gateway-cloudB-api-version",
            param="api_version",
        )
    return deployment_id, api_version


def uses_endpoint(target: Config) -> bool:
    """True for the AI-endpoint form (serverless / managed), False for resource deployments."""
    return bool(target.cloudB_deployment_type) or (bool(target.cloudB_endpoint_name) and not target.resource_name)


class CloudBAdapter(VendorAAdapter):
    """cloudB: vendorA bodies both ways; only the URL and the auth header differ."""

    def __init__(self) -> None:
        super().__init__(NAME, "", ENDPOINTS)

    def url(self, call: UpstreamCall) -> str:
        target = call.target
        if uses_endpoint(target):
            return self._endpoint_url(call)
        deployment_id, api_version = pick_deployment(target, call.model)
        base = target.custom_host
        if not base:
            resource = _require(target.resource_name, "resource_name",
                                "the resource's name; or send x-gateway-cloudB-resource-name")
            base = f"https://{resource}.openai.azure.com/openai"
        return (f"{base.rstrip('/')}/deployments/{deployment_id}{PATHS[call.endpoint]}"
                f"?api-version={_query_value(api_version, 'api_version')}")

    def _endpoint_url(self, call: UpstreamCall) -> str:
        target = call.target
        kind = target.cloudB_deployment_type or (MANAGED if target.cloudB_endpoint_name else SERVERLESS)
        base = target.custom_host
        if not base:
            region = _require(target.cloudB_region, "cloudB_region", "the endpoint's region")
            if kind == SERVERLESS:
                name = target.cloudB_endpoint_name or target.cloudB_deployment_name
                field = "cloudB_endpoint_name" if target.cloudB_endpoint_name else "cloudB_deployment_name"
                name = _require(name, field, "the serverless endpoint's name")
                base = f"https://{name.lower()}.{region}.models.ai.azure.com"
            elif kind == MANAGED:
                name = _require(target.cloudB_endpoint_name, "cloudB_endpoint_name", "the online endpoint's name")
                base = f"https://{name.lower()}.{region}.inference.ml.azure.com"
            else:
                raise InvalidRequest("cloudB_deployment_type must be serverless or managed",
                                     param="cloudB_deployment_type")
        url = f"{base.rstrip('/')}/v1{PATHS[call.endpoint]}"
        if target.cloudB_api_version:
            url += f"?api-version={_query_value(target.cloudB_api_version, 'cloudB_api_version')}"
        return url

    def resource_request(self, target: Config, method: str, path: str, query: str, body: Any,
                         content_type: str | None) -> UpstreamRequest:
        """Files, batches, fine-tuning jobs and stored responses live on the resource (not on a deployment):
        ``{base}/openai/files?api-version=...`` and so on, with the ``api-key`` header."""
        if uses_endpoint(target):
            raise InvalidRequest("cloudB serves files, batches, fine-tuning and stored responses on resource "
                                 "deployments only, not on AI endpoints", param="cloudB_deployment_type")
        api_version = target.api_version or target.cloudB_api_version
        if not api_version:
            raise InvalidRequest("cloudB needs api_version (the api-version query); or send "
                                 "x-gateway-cloudB-api-version", param="api_version")
        base = target.custom_host
        if not base:
            resource = _require(target.resource_name, "resource_name",
                                "the resource's name; or send x-gateway-cloudB-resource-name")
            base = f"https://{resource}.openai.azure.com/openai"
        version = f"api-version={_query_value(api_version, 'api_version')}"
        url = f"{base.rstrip('/')}{path}?{version}" + (f"&{query}" if query else "")
        headers = {"content-type": content_type} if content_type else {}
        if target.api_key:
            headers["api-key"] = target.api_key
        return UpstreamRequest(url, headers, body, method)

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        target = call.target
        url = self.url(call)
        headers = {"content-type": "application/json"}
        if uses_endpoint(target):
            if target.api_key:
                headers["authorization"] = f"Bearer {target.api_key}"
            kind = target.cloudB_deployment_type or MANAGED
            if kind == MANAGED and target.cloudB_deployment_name:
                headers["azureml-model-deployment"] = target.cloudB_deployment_name
        elif target.api_key:
            headers["api-key"] = target.api_key
        return UpstreamRequest(url, headers, call.body)

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        result = super().parse_response(call, status, headers, body)
        model_name = call.ctx.cloudB_model_name
        if model_name and not result.model:
            result.model = model_name
        return result

    def stream(self, call: UpstreamCall) -> CloudBStream:
        transformer = CloudBStream(NAME)
        transformer.strip_usage = call.strip_usage
        return transformer


class _ChunkMeta(msgspec.Struct):
    """The stream-wide members of a real chunk (``system_fingerprint`` only when the upstream sent it)."""

    id: str = ""
    created: int = 0
    model: str = ""
    system_fingerprint: str | None | msgspec.UnsetType = msgspec.UNSET


_chunk_meta = msgspec.json.Decoder(_ChunkMeta)
_any_json = msgspec.json.Decoder()
_encode = msgspec.json.encode
#: the marks of a chunk without a stream identity (compact JSON, as the service writes it)
_NO_ID = b'"id":""'
_NO_OBJECT = b'"object":""'


class CloudBStream(VendorAStream):
    """vendorA stream relay that gives cloudB's chunks without an identity the unified chunk shape.

    cloudB writes chunks with an empty ``id``, ``object`` and ``model`` and ``created: 0``: a leading one with
    ``prompt_filter_results`` and empty ``choices``, and, in its asynchronous content-filter mode, annotation chunks
    whose choices carry ``content_filter_results`` / ``content_filter_offsets`` and no ``delta``. Such chunks get the
    stream's ``id``, ``object: chat.completion.chunk``, ``created``, ``model`` (and ``system_fingerprint`` when the
    stream has one), and ``"delta": {}`` in every choice without one; their filter members are kept. Chunks seen
    before the first real chunk are held back until it arrives (so an error that follows them is still the stream's
    first event, a real status), and are sent first.
    """

    __slots__ = ("held", "meta")

    def __init__(self, provider: str) -> None:
        super().__init__(provider)
        self.held: list[bytes] = []
        #: the members every rewritten chunk starts with, known from the first real chunk
        self.meta: dict[str, Any] | None = None
        self.aligned = False  # no raw relay before the first real event (see passthrough_ready)

    def feed(self, chunk: bytes) -> list[bytes]:
        if _NO_ID in chunk or _NO_OBJECT in chunk:
            self.aligned = False  # through the splitter, to be rewritten
        return super().feed(chunk)

    def passthrough_ready(self) -> bool:
        return self.meta is not None  # until then every chunk goes through _events, which holds the filter chunks

    def _events(self, events: list) -> list[bytes]:
        ready: list = []
        for name, data in events:
            if _is_error(data):
                ready.append((name, data))
                continue
            if _NO_ID in data or _NO_OBJECT in data:
                if self.meta is None:
                    self.held.append(data)
                else:
                    ready.append((name, self._unified(data)))
                continue
            if self.meta is None and not self._is_done(data):
                self.meta = self._meta_of(data)
                ready.extend((None, self._unified(held)) for held in self.held)
                self.held = []
            ready.append((name, data))
        return super()._events(ready) if ready else []

    def close(self) -> list[bytes]:
        out = super().close()
        if self.held:
            self.meta = self.meta or {"id": "", "object": "chat.completion.chunk", "created": 0, "model": ""}
            out = [self._encode(self._unified(data)) for data in self.held] + out
            self.held = []
        return out

    @staticmethod
    def _meta_of(data: bytes) -> dict[str, Any]:
        try:
            meta = _chunk_meta.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            meta = _ChunkMeta()
        out: dict[str, Any] = {"id": meta.id, "object": "chat.completion.chunk", "created": meta.created,
                               "model": meta.model}
        if meta.system_fingerprint is not msgspec.UNSET:
            out["system_fingerprint"] = meta.system_fingerprint
        return out

    def _unified(self, data: bytes) -> bytes:
        try:
            doc = _any_json.decode(data)
        except msgspec.DecodeError:
            return data
        if not isinstance(doc, dict) or self.meta is None:
            return data
        out = dict(self.meta)
        for key, value in doc.items():
            if key not in out:
                out[key] = value
        choices = out.get("choices")
        if not isinstance(choices, list):
            out["choices"] = []
        else:
            for choice in choices:
                if isinstance(choice, dict) and "delta" not in choice:
                    choice["delta"] = {}
        return _encode(out)


def _is_error(data: bytes) -> bool:
    """An in-band error event: ``{"error": ...}`` at the top level."""
    return data.lstrip(b" \t\r\n{")[:7] == b'"error"'


_QUERY_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


def _query_value(value: str, field: str) -> str:
    if not _QUERY_SAFE.match(value):
        raise InvalidRequest(f"{field} {value!r} may hold only letters, digits, '.', '_' and '-'", param=field)
    return value
