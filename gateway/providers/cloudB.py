"""cloudB: resource deployments (vendorA wire format under ``/openai/deployments/...``) and AI endpoints.

Two ways of addressing a model, both speaking the vendorA wire format (request bytes forwarded unchanged, answers
parsed and streamed by the vendorA adapter's code):

1. **Resource deployments.** Base ``https://{resource_name}.openai.azure.com/openai``; paths
   ``/deployments/{deployment_id}/chat/completions``, ``/completions`` and ``/embeddings``, each with the required
   ``?api-version={api_version}`` query. The provider token goes in the ``api-key`` header (not ``Authorization``).
   ``resource_name``, ``deployment_id`` and ``api_version`` come from the config or from the
   ``x-gateway-cloudB-resource-name`` / ``-deployment-id`` / ``-api-version`` headers (``api_version`` falls back to
   ``cloudB_api_version``). With ``deployments`` in the config, the one whose ``alias`` equals the request's
   ``model`` is used (its ``deployment_id`` and ``api_version``), else the one marked ``is_default``.
2. **AI endpoints** (``cloudB_deployment_type`` set, or ``cloudB_endpoint_name`` without ``resource_name``), with
   bearer auth (``Authorization: Bearer <token>``) and vendorA paths under ``/v1``:

   - ``serverless`` (pay-as-you-go model endpoints), named by ``cloudB_endpoint_name`` or else
     ``cloudB_deployment_name``: ``https://{name}.{cloudB_region}.models.ai.azure.com/v1/chat/completions``
   - ``managed`` (online endpoints on managed compute):
     ``https://{cloudB_endpoint_name}.{cloudB_region}.inference.ml.azure.com/v1/chat/completions``; a
     ``cloudB_deployment_name`` picks the deployment behind the endpoint with the ``azureml-model-deployment``
     header.

   ``/v1/completions`` and ``/v1/embeddings`` likewise; ``cloudB_api_version`` (when set) is sent as the
   ``api-version`` query.

``custom_host`` replaces the base in both forms (the same path is appended). A missing piece is a 400 naming the
field. ``x-gateway-cloudB-model-name`` names the underlying model for the request's records when the answer does
not. Streams are relayed as vendorA's, except that leading ``prompt_filter_results`` chunks (empty ``choices``) are
held back until the first real event, so an error that follows them is still the stream's first event.

Wire facts (public references: learn.microsoft.com/azure/ai-services/openai/reference,
learn.microsoft.com/azure/ai-studio/reference/reference-model-inference-api,
learn.microsoft.com/azure/machine-learning/how-to-authenticate-online-endpoint): the resource data-plane inference
API (``/openai/deployments/{id}/...`` with an ``api-version`` query and the ``api-key`` header; errors as
``{"error": {"code", "message"}}``; a stream may open with a chunk whose ``choices`` is empty and which carries
``prompt_filter_results``); the AI model inference endpoints (``*.models.ai.azure.com`` and
``*.inference.ml.azure.com`` hosts, bearer keys, ``/v1/chat/completions`` routes, the ``azureml-model-deployment``
header of managed online endpoints).
"""

from __future__ import annotations

import re
from typing import Any

from gateway.http.errors import InvalidRequest
from gateway.providers.base import (
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    UpstreamCall,
    UpstreamRequest,
    UpstreamResult,
)
from gateway.providers.vendorA import PATHS, VendorAAdapter, VendorAStream

NAME = "cloudB"
ENDPOINTS = frozenset({CHAT, COMPLETIONS, EMBEDDINGS})
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


def pick_deployment(target: Any, model: str | None) -> tuple[str, str]:
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


def uses_endpoint(target: Any) -> bool:
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

    def stream(self, call: UpstreamCall) -> "CloudBStream":
        return CloudBStream(NAME)


class CloudBStream(VendorAStream):
    """vendorA stream relay that holds back the leading ``prompt_filter_results`` chunk(s) (empty ``choices``)
    until the first real event, so an error that follows them is still the stream's first event (a real status).
    """

    __slots__ = ("held", "started")

    def __init__(self, provider: str) -> None:
        super().__init__(provider)
        self.held: list[bytes] = []
        self.started = False
        self.aligned = False  # no raw relay before the first real event (see passthrough_ready)

    def _events(self, events: list) -> list[bytes]:
        out = super()._events(events)
        if self.started or not out:
            return out
        index = 0
        while index < len(out) and _is_filter_only(out[index]):
            index += 1
        self.held.extend(out[:index])
        if index == len(out):
            return []
        self.started = True
        out = self.held + out[index:]
        self.held = []
        return out

    def passthrough_ready(self) -> bool:
        return self.started  # until then every chunk goes through _events, which holds the filter chunks

    def close(self) -> list[bytes]:
        out = super().close()
        if self.held:
            out = self.held + out
            self.held = []
        return out


def _is_filter_only(event: bytes) -> bool:
    return b'"prompt_filter_results"' in event and b'"choices":[]' in event


_QUERY_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


def _query_value(value: str, field: str) -> str:
    if not _QUERY_SAFE.match(value):
        raise InvalidRequest(f"{field} {value!r} may hold only letters, digits, '.', '_' and '-'", param=field)
    return value
