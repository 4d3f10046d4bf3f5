"""Where a session goes: the provider's upgrade URL and credential headers for the request's target config (the
Realtime API's, and the Responses API's WebSocket mode's).

Wire facts relied on (the openai SDK 3.57's ``realtime.connect()`` and ``lib/azure.py``, the Realtime WebSocket
guide, cloudB's realtime reference; the mock in ``gateway_mock/realtime.py`` follows them):

- vendorA: ``GET {base}/realtime?model=<model>`` upgraded (``base`` the provider's ``https://api.openai.com/v1`` or the
  config's ``custom_host``), ``Authorization: Bearer <provider key>``; ``OpenAI-Organization`` / ``OpenAI-Project``
  as on every vendorA call. The beta interface also wants ``OpenAI-Beta: realtime=v1``, which is passed on when the
  client sent it.
- cloudB resource deployments: ``GET {base}/realtime?api-version=<v>&deployment=<deployment>`` with ``api-key: <key>``
  (``base`` is ``https://<resource>.openai.azure.com/openai`` or the config's ``custom_host``, as chat builds it);
  the GA form ``GET {base}/v1/realtime?model=<deployment>`` takes the same header and no api-version. The gateway
  uses the GA form when the api version is ``v1`` or none is known, else the dated form. The deployment is the
  config's (``deployments`` by alias, the default one, or ``deployment_id``), else the model the client named.
  cloudB's AI endpoints (serverless, managed) have no realtime route: refused with a 400.
- The Responses WebSocket mode (the SDK's ``responses.connect()``: its base URL plus ``/responses``, no query of its
  own; ``gateway_mock/responses_ws.py``): vendorA ``GET {base}/responses`` with ``Authorization: Bearer <key>``
  (and the organization and project headers); cloudB resources ``GET {base}/v1/responses`` (``base`` as above, so
  ``https://<resource>.openai.azure.com/openai/v1/responses``) with ``api-key``. The model travels in each
  ``response.create``, not in the URL: a session's model is the one the client names in the query, if any.
  Every other provider gets a ``translated`` target (no URL: the gateway serves the socket itself and runs each
  turn through its Responses door, ``translate.py``).

The URLs are ``http(s)://`` (the upgrade is an HTTP request; the client maps them onto ``ws(s)://``), so the SSRF
guard checks them as any upstream URL. The provider key stays in the headers built here; nothing else sees them.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from gateway.http.errors import InvalidRequest
from gateway.providers.cloudB import pick_deployment, uses_endpoint
from gateway.schema.config import Config

VENDOR_A_BASE = "https://api.openai.com/v1"
#: the providers a session may go to
PROVIDERS = ("vendorA", "cloudB")
#: the ``api`` of a Responses WebSocket target
RESPONSES_API = "Responses"
#: the version that selects cloudB's GA (``/openai/v1/realtime``) form
GA_VERSION = "v1"
#: the longest model name a session may name
MAX_MODEL_CHARS = 256
#: a deployment named by the client goes into the URL: letters, digits, '.', '_' and '-' only
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RealtimeTarget:
    """The upstream of one session: ``url`` (http/https), ``headers`` (the provider's credential), the provider's
    name, the model (cloudB: the deployment) it serves, and the ``api`` it speaks (for messages); ``translated``: no
    provider socket, the gateway serves the session's turns itself (``url`` and ``headers`` empty)."""

    __slots__ = ("url", "headers", "provider", "model", "api", "translated")

    def __init__(self, url: str, headers: dict[str, str], provider: str, model: str, api: str = "Realtime",
                 translated: bool = False) -> None:
        self.url = url
        self.headers = headers
        self.provider = provider
        self.model = model
        self.api = api
        self.translated = translated

    def __repr__(self) -> str:  # never the headers: they hold the provider key
        return f"RealtimeTarget({self.provider}, {self.model})"


def realtime_target(config: Config, model: str | None, api_version: str | None = None,
                    beta: str | None = None) -> RealtimeTarget:
    """The target of a session for the leaf ``config`` and the ``model`` the client named (``api_version``: the
    client's ``api-version`` query, used when the config names none; ``beta``: its ``OpenAI-Beta`` header)."""
    provider = config.provider or ""
    if provider == "vendorA":
        return _vendor_a(config, _model(model), beta)
    if provider == "cloudB":
        return _cloud_b(config, model, api_version)
    raise InvalidRequest(f"provider '{provider}' has no Realtime API through the gateway; realtime sessions go to "
                         f"{' or '.join(PROVIDERS)}", param="provider")


def _model(model: str | None) -> str:
    if not model:
        raise InvalidRequest("missing model: send /v1/realtime?model=<model>", param="model")
    if len(model) > MAX_MODEL_CHARS:
        raise InvalidRequest(f"model is longer than {MAX_MODEL_CHARS} characters", param="model")
    return model


def responses_target(config: Config, model: str | None) -> RealtimeTarget:
    """The target of a Responses WebSocket session for the leaf ``config`` (``model``: the one the client named in
    the query, a label only): vendorA and cloudB forwarded, any other provider translated."""
    provider = config.provider or ""
    model = _label(model)
    if provider == "vendorA":
        base = (config.custom_host or VENDOR_A_BASE).rstrip("/")
        return RealtimeTarget(f"{base}/responses", _vendor_a_headers(config), "vendorA", model, RESPONSES_API)
    if provider == "cloudB":
        if uses_endpoint(config):
            raise InvalidRequest("cloudB serves the Responses WebSocket mode on resource deployments only, not on AI "
                                 "endpoints", param="cloudB_deployment_type")
        headers = {"api-key": config.api_key} if config.api_key else {}
        return RealtimeTarget(f"{_cloud_b_base(config)}/v1/responses", headers, "cloudB", model, RESPONSES_API)
    return RealtimeTarget("", {}, provider, model, RESPONSES_API, translated=True)


def _label(model: str | None) -> str:
    if model and len(model) > MAX_MODEL_CHARS:
        raise InvalidRequest(f"model is longer than {MAX_MODEL_CHARS} characters", param="model")
    return model or ""


def _vendor_a_headers(config: Config) -> dict[str, str]:
    headers: dict[str, str] = {}
    if config.api_key:
        headers["authorization"] = f"Bearer {config.api_key}"
    if config.vendorA_organization:
        headers["openai-organization"] = config.vendorA_organization
    if config.vendorA_project:
        headers["openai-project"] = config.vendorA_project
    return headers


def _vendor_a(config: Config, model: str, beta: str | None) -> RealtimeTarget:
    base = (config.custom_host or VENDOR_A_BASE).rstrip("/")
    headers = _vendor_a_headers(config)
    if beta:
        headers["openai-beta"] = beta
    return RealtimeTarget(f"{base}/realtime?model={quote(model, safe='')}", headers, "vendorA", model)


def _cloud_b(config: Config, model: str | None, client_version: str | None) -> RealtimeTarget:
    if uses_endpoint(config):
        raise InvalidRequest("cloudB serves the Realtime API on resource deployments only, not on AI endpoints",
                             param="cloudB_deployment_type")
    if config.deployments or config.deployment_id:
        deployment, version = pick_deployment(config, model) if config.deployments else (
            config.deployment_id or "", config.api_version or config.cloudB_api_version)
    else:
        deployment, version = _model(model), config.api_version or config.cloudB_api_version
    if not _SAFE.match(deployment):
        raise InvalidRequest(f"deployment {deployment!r} may hold only letters, digits, '.', '_' and '-'",
                             param="model")
    version = version or client_version
    base = _cloud_b_base(config)
    headers = {"api-key": config.api_key} if config.api_key else {}
    if not version or version == GA_VERSION:
        url = f"{base}/v1/realtime?model={deployment}"
    else:
        url = f"{base}/realtime?api-version={quote(version, safe='')}&deployment={deployment}"
    return RealtimeTarget(url, headers, "cloudB", deployment)


def _cloud_b_base(config: Config) -> str:
    """The resource's ``.../openai`` base (or the config's ``custom_host``), without a trailing slash."""
    base = config.custom_host
    if not base:
        resource = config.resource_name
        if not resource or not _SAFE.match(resource):
            raise InvalidRequest("cloudB needs resource_name (the resource's name; or send "
                                 "x-gateway-cloudB-resource-name) or custom_host", param="resource_name")
        base = f"https://{resource}.openai.azure.com/openai"
    return base.rstrip("/")
