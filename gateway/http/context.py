"""The one place where request headers become a RequestContext (every x-gateway-* spelling, read once).

A gateway header may be spelled as in the spec's table (``x-gateway-api-key``) or with the snake_case or camelCase
parameter name after the prefix (``x-gateway-api_key``, ``x-gateway-apiKey``): names are compared with dashes and
underscores removed, case-insensitively. ``X-cloudC-LLM-Request-Type`` (no gateway prefix) is read too. No gateway
header, and no client header that is not named in ``x-gateway-forward-headers``, is ever sent upstream.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.process_ids import TRACE_IDS

# header_names, client_headers, HOP_BY_HOP and new_trace_id are public too but stay out of __all__, which the compiled
# twin (gateway._speedups.context: build_context in typed code) mirrors name for name.
__all__ = ["RequestContext", "build_context"]

_PREFIX = b"x-gateway-"
_PREFIX_LEN = len(_PREFIX)
_json_decode = msgspec.json.decode

#: normalised suffix (lowercase, no dashes or underscores) -> RequestContext attribute
_GATEWAY_FIELDS: dict[str, str] = {
    "apikey": "api_key",
    "provider": "provider",
    "virtualkey": "virtual_key",
    "config": "config",
    "customhost": "custom_host",
    "traceid": "trace_id",
    "spanid": "span_id",
    "parentspanid": "parent_span_id",
    "spanname": "span_name",
    "metadata": "metadata",
    "cacheforcerefresh": "cache_force_refresh",
    "cachenamespace": "cache_namespace",
    "requesttimeout": "request_timeout",
    "forwardheaders": "forward_headers",
    "sensitiveheaders": "sensitive_headers",
    "cloudbresourcename": "cloudB_resource_name",
    "cloudbdeploymentid": "cloudB_deployment_id",
    "cloudbapiversion": "cloudB_api_version",
    "cloudbmodelname": "cloudB_model_name",
    "cloudcprojectid": "cloudC_project_id",
    "cloudcregion": "cloudC_region",
    "cloudasessiontoken": "cloudA_session_token",
    "cloudasecretaccesskey": "cloudA_secret_access_key",
    "cloudaaccesskeyid": "cloudA_access_key_id",
    "cloudaregion": "cloudA_region",
}

#: never forwarded, whatever x-gateway-forward-headers says (hop-by-hop and framing headers)
HOP_BY_HOP = frozenset(
    {
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "proxy-authorization", "proxy-authenticate", "expect", "accept-encoding",
    }
)


def header_names(value: str, field: str) -> tuple[str, ...]:
    """Parse an array-typed header: comma-separated names or a JSON array of strings, lower-cased."""
    text = value.strip()
    if text.startswith("["):
        try:
            items = _json_decode(text)
        except (msgspec.DecodeError, RecursionError):
            raise InvalidRequest(f"{field} is not a valid JSON array of header names", param=field) from None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise InvalidRequest(f"{field} must be an array of header names", param=field)
        return tuple(i.strip().lower() for i in items if i.strip())
    return tuple(p.strip().lower() for p in text.split(",") if p.strip())


class RequestContext:
    """Everything the gateway headers say about one request, parsed once."""

    __slots__ = (
        "api_key", "provider", "virtual_key", "config", "custom_host", "trace_id",
        "span_id", "parent_span_id", "span_name", "traceparent", "metadata", "cache_force_refresh",
        "cache_namespace", "request_timeout", "forward_headers", "sensitive_headers", "bearer",
        "cloudB_resource_name", "cloudB_deployment_id", "cloudB_api_version", "cloudB_model_name",
        "cloudC_project_id", "cloudC_region", "cloudC_llm_request_type", "cloudA_session_token",
        "cloudA_secret_access_key", "cloudA_access_key_id", "cloudA_region", "raw_headers", "_headers",
        "workspace", "has_cloud_headers",
    )

    def __init__(self) -> None:
        self.api_key: str | None = None
        self.provider: str | None = None
        self.virtual_key: str | None = None
        self.config: str | None = None
        self.custom_host: str | None = None
        self.trace_id: str = ""
        self.span_id: str | None = None
        self.parent_span_id: str | None = None
        self.span_name: str | None = None
        self.traceparent: str | None = None
        self.metadata: dict[str, Any] = {}
        self.cache_force_refresh = False
        self.cache_namespace: str | None = None
        self.request_timeout: int | None = None
        self.forward_headers: tuple[str, ...] = ()
        self.sensitive_headers: frozenset[str] = frozenset()
        self.bearer: str | None = None
        self.cloudB_resource_name: str | None = None
        self.cloudB_deployment_id: str | None = None
        self.cloudB_api_version: str | None = None
        self.cloudB_model_name: str | None = None
        self.cloudC_project_id: str | None = None
        self.cloudC_region: str | None = None
        self.cloudC_llm_request_type: str | None = None
        self.cloudA_session_token: str | None = None
        self.cloudA_secret_access_key: str | None = None
        self.cloudA_access_key_id: str | None = None
        self.cloudA_region: str | None = None
        #: the ASGI header list as received; ``headers`` is built from it on first use
        self.raw_headers: list[tuple[bytes, bytes]] | tuple = ()
        self._headers: dict[str, str] | None = None
        self.workspace: str | None = None
        #: a cloud-specific gateway header (cloudA/cloudB/cloudC) was sent
        self.has_cloud_headers = False

    @property
    def headers(self) -> dict[str, str]:
        """Every non-gateway header of the request, lower-cased name -> value (last wins)."""
        if self._headers is None:
            self._headers = client_headers(self.raw_headers)
        return self._headers

    def forwarded(self, extra_names: tuple[str, ...] | list[str] | None = None,
                  masked: frozenset[str] = frozenset()) -> dict[str, str]:
        """The client headers to send upstream unchanged: those named in forward_headers (header or config),
        minus sensitive, gateway and hop-by-hop headers and those in ``masked`` (lower-case names masked
        organisation-wide: the ``organisation_headers_to_mask`` setting)."""
        names = self.forward_headers
        if extra_names:
            names = names + tuple(n.lower() for n in extra_names)
        if not names:
            return {}
        out: dict[str, str] = {}
        headers = self.headers
        sensitive = self.sensitive_headers | masked
        for name in names:
            if name in headers and name not in sensitive and name not in HOP_BY_HOP:
                out[name] = headers[name]
        return out


def _set_metadata(ctx: RequestContext, value: str) -> None:
    try:
        doc = _json_decode(value)
    except msgspec.DecodeError:
        raise InvalidRequest("x-gateway-metadata must be a JSON object", param="x-gateway-metadata") from None
    except RecursionError:  # JSON nested deeper than the decoder follows
        raise InvalidRequest("x-gateway-metadata is nested too deeply", param="x-gateway-metadata") from None
    if not isinstance(doc, dict):
        raise InvalidRequest("x-gateway-metadata must be a JSON object", param="x-gateway-metadata")
    ctx.metadata = doc


def _set_request_timeout(ctx: RequestContext, value: str) -> None:
    try:
        timeout = int(value.strip())
    except ValueError:
        raise InvalidRequest(
            "x-gateway-request-timeout must be an integer number of milliseconds", param="x-gateway-request-timeout"
        ) from None
    if timeout <= 0:
        raise InvalidRequest("x-gateway-request-timeout must be > 0", param="x-gateway-request-timeout")
    ctx.request_timeout = timeout


def _set_cache_force_refresh(ctx: RequestContext, value: str) -> None:
    flag = value.strip().lower()
    if flag not in ("true", "false"):
        raise InvalidRequest("x-gateway-cache-force-refresh must be true or false",
                             param="x-gateway-cache-force-refresh")
    ctx.cache_force_refresh = flag == "true"


def _set_forward_headers(ctx: RequestContext, value: str) -> None:
    ctx.forward_headers = header_names(value, "x-gateway-forward-headers")


def _set_sensitive_headers(ctx: RequestContext, value: str) -> None:
    ctx.sensitive_headers = frozenset(header_names(value, "x-gateway-sensitive-headers"))


_PARSED: dict[str, Callable[[RequestContext, str], None]] = {
    "metadata": _set_metadata,
    "request_timeout": _set_request_timeout,
    "cache_force_refresh": _set_cache_force_refresh,
    "forward_headers": _set_forward_headers,
    "sensitive_headers": _set_sensitive_headers,
}


def _setter(attr: str) -> Callable[[RequestContext, str], None]:
    parsed = _PARSED.get(attr)
    if parsed is not None:
        return parsed
    if attr.startswith("cloud"):
        def set_cloud(ctx: RequestContext, value: str) -> None:
            setattr(ctx, attr, value)
            ctx.has_cloud_headers = True

        return set_cloud

    def set_plain(ctx: RequestContext, value: str) -> None:
        setattr(ctx, attr, value)

    return set_plain


Setter = Callable[[RequestContext, str], None]
#: normalised suffix -> setter
_BY_NORM: dict[str, Setter] = {norm: _setter(attr) for norm, attr in _GATEWAY_FIELDS.items()}


def _spellings() -> dict[bytes, Setter]:
    """Full header name -> setter for the spellings clients send, as an ASGI server hands them over (lower case):
    the spec's (``x-gateway-api-key``), snake_case (``x-gateway-api_key``) and camelCase (``x-gateway-apikey``)."""
    table: dict[bytes, Setter] = {}
    for norm, attr in _GATEWAY_FIELDS.items():
        snake = attr.lower()
        for spelling in (snake.replace("_", "-"), snake, norm):
            table[_PREFIX + spelling.encode()] = _BY_NORM[norm]
    return table


_SETTERS = _spellings()
#: full header name -> RequestContext attribute, for the spellings whose value is stored as sent (no parsing, not a
#: cloud header): the compiled twin sets these itself instead of calling their setter
_PLAIN_ATTRS: dict[bytes, str] = {
    name: _GATEWAY_FIELDS[norm] for name, norm in (
        (name, name[_PREFIX_LEN:].decode().replace("-", "").replace("_", "")) for name in _SETTERS)
    if _GATEWAY_FIELDS[norm] not in _PARSED and not _GATEWAY_FIELDS[norm].startswith("cloud")
}


def _setter_for(name: bytes) -> Setter | None:
    """The setter of a gateway header in any other spelling (upper case, mixed separators); None for a name that is
    not a gateway header. Worked out each time: such spellings are rare, and remembering them would let clients
    grow a table."""
    norm = name[_PREFIX_LEN:].decode("latin-1").replace("-", "").replace("_", "").lower()
    return _BY_NORM.get(norm)


def client_headers(raw_headers: list[tuple[bytes, bytes]] | tuple) -> dict[str, str]:
    """The request's non-gateway headers as a dict (lower-cased names; last wins)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in raw_headers:
        name = raw_name.lower()
        if not name.startswith(_PREFIX):
            out[name.decode("latin-1")] = raw_value.decode("latin-1")
    return out


def build_context(raw_headers: list[tuple[bytes, bytes]] | tuple) -> RequestContext:
    """Read the ASGI header list once into a RequestContext. Bad gateway header values raise InvalidRequest.

    ASGI servers give lower-case header names (Granian does); other headers are only decoded when used.
    """
    ctx = RequestContext()
    ctx.raw_headers = raw_headers
    for name, raw_value in raw_headers:
        if name.startswith(_PREFIX):
            setter = _SETTERS.get(name) or _setter_for(name)
            if setter is not None:
                setter(ctx, raw_value.decode("latin-1"))
        elif name == b"authorization":
            value = raw_value.decode("latin-1")
            if value[:7].lower() == "bearer ":
                ctx.bearer = value[7:].strip()
        elif name == b"traceparent":
            ctx.traceparent = raw_value.decode("latin-1")
        elif name == b"x-cloudc-llm-request-type":
            ctx.cloudC_llm_request_type = raw_value.decode("latin-1")
    if not ctx.trace_id:
        ctx.trace_id = _trace_from_parent(ctx.traceparent) or new_trace_id()
    return ctx


#: a 32-hex trace id: a random per-process prefix and a counter (unique without a syscall per request)
new_trace_id = TRACE_IDS.next_hex


def _trace_from_parent(traceparent: str | None) -> str | None:
    """The trace id of a W3C traceparent (``00-<32 hex>-<16 hex>-<2 hex>``), when well formed."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
        try:
            int(parts[1], 16)
        except ValueError:
            return None
        return parts[1].lower()
    return None
