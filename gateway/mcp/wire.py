"""MCP on the wire: JSON-RPC 2.0 messages, the protocol revisions the gateway speaks, and their HTTP headers.

Facts relied on (the MCP specification's Streamable HTTP transport, and the official Python SDK 2.3.0's client and
server, whose traffic was captured on loopback for both revisions):

- Every client message is one JSON-RPC object POSTed to the endpoint with ``Accept: application/json,
  text/event-stream``. A request (it has an ``id``) is answered either with ``application/json`` (one response) or
  with ``text/event-stream`` whose events (``event: message``) carry JSON-RPC messages: notifications such as
  ``notifications/progress`` (``{progressToken, progress, total?, message?}``) and finally the response with the
  request's ``id``. A notification (no ``id``) is answered ``202`` with no body. JSON-RPC batches (arrays) were
  removed in 2025-06-18.
- Revision **2026-07-28** is stateless: no ``initialize`` and no ``Mcp-Session-Id``. Every request carries
  ``params._meta`` with ``io.modelcontextprotocol/protocolVersion``, ``.../clientCapabilities`` (required) and
  ``.../clientInfo`` (optional), and the headers ``MCP-Protocol-Version`` (equal to the envelope's version),
  ``Mcp-Method`` (the method) and, for ``tools/call``/``prompts/get``/``resources/read``, ``Mcp-Name`` (the tool or
  prompt name, the resource URI). A mismatch is error -32020 (HTTP 400); an unsupported version -32022 with
  ``data: {supported, requested}`` (HTTP 400). Clients probe with ``server/discover`` (result ``{supportedVersions,
  capabilities, cacheScope, ttlMs, resultType, _meta: {io.modelcontextprotocol/serverInfo}}``) and fall back to
  ``initialize`` on any error that is not -32022 naming only modern versions. Results carry ``resultType:
  "complete"``. Cancelling is closing the response stream.
- Revisions up to **2025-11-25** use the handshake: ``initialize`` ``{protocolVersion, capabilities, clientInfo}``
  answered with ``{protocolVersion, capabilities, serverInfo, instructions?}`` and an ``Mcp-Session-Id`` header that
  every later request sends back (with ``MCP-Protocol-Version``); ``notifications/initialized`` follows; an unknown
  or expired session is HTTP 404 (the client starts again); ``DELETE`` ends a session; ``GET`` opens an optional
  server-to-client stream, which a server may refuse with 405. Cancelling is ``notifications/cancelled
  {requestId, reason?}``.
- Error codes: -32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid params (also an
  unknown tool), -32603 internal error; the SDK maps -32700/-32600/-32602/-32020/-32022 to HTTP 400 and -32601 to
  404, others to 200. The error raised and its body are ``gateway/http/jsonrpc.py``'s, as A2A's are.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http import jsonrpc
from gateway.http.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RequestId,
    error_body,
)

#: the stateless revision, and the handshake revisions the gateway still speaks (newest first)
MODERN = "2026-07-28"
MODERN_VERSIONS: tuple[str, ...] = (MODERN,)
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[0]

VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
ENVELOPE_KEYS = (VERSION_META, CLIENT_INFO_META, CAPABILITIES_META)

VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
SESSION_HEADER = "mcp-session-id"

#: the methods whose ``Mcp-Name`` header mirrors a param, and which param
NAMED_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

#: the SDKs' "connection closed" and "request timeout" codes, used for an upstream that failed or went silent
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022

#: the HTTP status an error code is answered with (others: 200), as the SDK's servers answer them
ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                UNSUPPORTED_VERSION: 400, METHOD_NOT_FOUND: 404}

SERVER_INFO = {"name": "gateway", "version": "1"}
JSON_TYPE = b"application/json"
SSE_TYPE = b"text/event-stream"


class Message(msgspec.Struct, omit_defaults=True):
    """One JSON-RPC message, any kind: a request (``id`` and ``method``), a notification (``method`` only), a
    response (``id`` and ``result`` or ``error``)."""

    jsonrpc: str = ""
    id: RequestId | None | msgspec.UnsetType = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: dict[str, Any] | None | msgspec.UnsetType = msgspec.UNSET
    result: Any = msgspec.UNSET
    error: Any = msgspec.UNSET

    @property
    def is_request(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is not msgspec.UNSET and self.id is not None

    @property
    def is_notification(self) -> bool:
        return self.method is not msgspec.UNSET and (self.id is msgspec.UNSET or self.id is None)

    @property
    def is_response(self) -> bool:
        return self.method is msgspec.UNSET and (self.result is not msgspec.UNSET or self.error is not msgspec.UNSET)

    def param(self, name: str) -> Any:
        params = self.params
        return params.get(name) if isinstance(params, dict) else None


class RpcError(jsonrpc.RpcError):
    """A JSON-RPC error to answer (``gateway/http/jsonrpc.py``); its HTTP status by ``ERROR_STATUS`` unless given."""

    STATUS = ERROR_STATUS


_decoder = msgspec.json.Decoder(Message)
_encode = msgspec.json.encode


def decode(body: bytes) -> Message:
    """One JSON-RPC message from ``body``: -32700 when it is not JSON, -32600 when it is not one message object."""
    message = jsonrpc.decode_one(_decoder, body, "a JSON-RPC message", "JSON-RPC batches are not supported "
                                 "(removed in MCP 2025-06-18): send one message per request", RpcError)
    if message.jsonrpc != "2.0":
        raise RpcError(INVALID_REQUEST, "jsonrpc must be \"2.0\"")
    if message.method is msgspec.UNSET and not message.is_response:
        raise RpcError(INVALID_REQUEST, "a JSON-RPC message needs a method (request or notification) or a result "
                                        "or error (response)")
    return message


def result_body(id: RequestId | None, result: Any) -> bytes:
    return _encode({"jsonrpc": "2.0", "id": id, "result": result})


def encode(message: Message | dict[str, Any]) -> bytes:
    return _encode(message)


#: the methods whose 2026-07-28 results are cacheable (``cacheScope`` and ``ttlMs`` required)
CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
                       "server/discover"})


def as_modern_response(method: str, data: bytes) -> bytes:
    """A handshake-era server's response ``data`` as a 2026-07-28 client must get it: its result with ``resultType``
    (``"complete"``) and, for a cacheable one, ``cacheScope`` (``"private"``) and ``ttlMs`` (0) where it lacks them;
    anything else as it came."""
    try:
        message = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return data
    result = message.result
    if not isinstance(result, dict):
        return data
    added: dict[str, Any] = {}
    if "resultType" not in result:
        added["resultType"] = "complete"
    if method in CACHEABLE:
        if "cacheScope" not in result:
            added["cacheScope"] = "private"
        if "ttlMs" not in result:
            added["ttlMs"] = 0
    if not added:
        return data
    return _encode(msgspec.structs.replace(message, result={**result, **added}))


def sse_event(data: bytes) -> bytes:
    """One JSON-RPC message as the Streamable HTTP transport's event."""
    return b"event: message\ndata: " + data + b"\n\n"


def envelope_version(params: Any) -> str | None:
    """The 2026-07-28 envelope's protocol version in ``params._meta`` (None: no envelope, a handshake-era message);
    -32602 when there is an envelope whose version is not a string."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or VERSION_META not in meta:
        return None
    version = meta[VERSION_META]
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, f"params._meta[{VERSION_META!r}] must be a string")
    if CAPABILITIES_META not in meta:
        raise RpcError(INVALID_PARAMS, f"params._meta is missing the required envelope key {CAPABILITIES_META!r}")
    return version


def without_envelope(params: Any) -> Any:
    """``params`` without the 2026-07-28 envelope keys in ``_meta`` (what a handshake-era server is sent); the other
    ``_meta`` keys (``progressToken``) stay."""
    if not isinstance(params, dict):
        return params
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not any(key in meta for key in ENVELOPE_KEYS):
        return params
    kept = {k: v for k, v in meta.items() if k not in ENVELOPE_KEYS}
    out = {k: v for k, v in params.items() if k != "_meta"}
    if kept:
        out["_meta"] = kept
    return out


def with_envelope(params: Any) -> dict[str, Any]:
    """``params`` with the gateway's own 2026-07-28 envelope (what a stateless server is sent): the client's
    envelope, if any, replaced, its other ``_meta`` keys kept."""
    out = dict(params) if isinstance(params, dict) else {}
    meta = dict(out.get("_meta") or {}) if isinstance(out.get("_meta"), dict) else {}
    meta[VERSION_META] = MODERN
    meta[CAPABILITIES_META] = {}
    meta[CLIENT_INFO_META] = SERVER_INFO
    out["_meta"] = meta
    return out


__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "METHOD_NOT_FOUND", "PARSE_ERROR", "RequestId",
           "error_body"]
