"""JSON-RPC 2.0 errors as the gateway answers them on its JSON-RPC endpoints (MCP's ``gateway/mcp/wire.py``, A2A's
``gateway/agents/wire.py``): the codes both protocols share, the error to raise, its response body, a gateway
error met on the way (a refused key, a rate limit) as one, and the errors of reading one JSON-RPC object from a body.

Facts relied on (the JSON-RPC 2.0 specification, section 5.1): an error response is ``{"jsonrpc": "2.0", "id",
"error": {"code", "message", "data"?}}`` whose ``id`` is the request's, or null when it could not be read; the codes
-32700 (parse error), -32600 (invalid request), -32601 (method not found), -32602 (invalid params) and -32603
(internal error) are the specification's own, -32000..-32099 are left to implementations. Both MCP (its SDKs) and
A2A (-32001..-32009) use codes of that range; -32010, which neither defines, is the gateway's for a guardrail's
deny. A batch (an array of requests) is an array where an object is expected; neither protocol serves one here
(MCP removed batches in 2025-06-18, A2A's SDK server refuses them). HTTP statuses are each protocol's: A2A servers
answer every error with 200, MCP's SDK servers answer some with 400 or 404 (``RpcError.STATUS`` of
``gateway/mcp/wire.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import msgspec

from gateway.http.errors import GatewayError, mid_sentence

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: the implementation-defined code of a call a guardrail denied (MCP tool calls and A2A agent calls alike)
GUARDRAIL_DENIED = -32010

RequestId = int | str

_encode = msgspec.json.encode
_E = TypeVar("_E", bound="RpcError")
_T = TypeVar("_T")


class RpcError(Exception):
    """A JSON-RPC error to answer: ``code``, ``message``, optional ``data``; ``status`` is the HTTP status, when
    not given the one ``STATUS`` maps the code to (200 for a code it does not name: a protocol's class sets its
    own map)."""

    #: the HTTP status of an error by its code, when the raiser gives none
    STATUS: ClassVar[dict[int, int]] = {}

    def __init__(self, code: int, message: str, data: Any = None, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status if status is not None else self.STATUS.get(code, 200)

    def body(self, id: RequestId | None) -> bytes:
        return error_body(id, self.code, self.message, self.data)

    @classmethod
    def of(cls: type[_E], exc: GatewayError) -> _E:
        """A gateway error met on the way (a refused key's 401 or 403, an unknown record's 404, a body's 413, a
        rate limit's 429, the state store's 503) as the JSON-RPC error: its message as the gateway's error says it,
        the gateway's error fields in ``data``, its HTTP status kept."""
        return cls(INTERNAL_ERROR if exc.status >= 500 else INVALID_REQUEST, exc.message,
                   data={"status": exc.status, "type": exc.type, "param": exc.param, "code": exc.code},
                   status=exc.status)


def error_body(id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encode({"jsonrpc": "2.0", "id": id, "error": error})


def decode_one(decoder: msgspec.json.Decoder[_T], body: bytes, what: str, batches: str,
               error: type[RpcError] = RpcError) -> _T:
    """``body`` as the one JSON-RPC object ``decoder`` reads (``what``: ``a JSON-RPC message``): -32700 when it is
    not JSON (or nested too deeply, or not UTF-8), -32600 when it is a batch (``batches``: the refusal, saying what
    to send instead) or not ``what`` (msgspec's reason after it). ``error``: the protocol's error class."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        if body.lstrip()[:1] == b"[":
            raise error(INVALID_REQUEST, batches) from None
        raise error(INVALID_REQUEST, f"the body is not {what}: {mid_sentence(str(exc))}") from None
    except msgspec.DecodeError as exc:
        raise error(PARSE_ERROR, f"the body is not valid JSON: {exc}") from None
    except (RecursionError, UnicodeDecodeError):
        raise error(PARSE_ERROR, "the body is JSON nested too deeply, or not UTF-8") from None
