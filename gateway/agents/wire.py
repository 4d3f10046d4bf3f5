"""A2A on the wire: the JSON-RPC requests the gateway relays, the methods of both protocol revisions, their headers,
errors, and where a task id and a message's text live in them.

Facts relied on (the A2A specification's JSON-RPC binding, revisions 0.3 and 1.0, and the official Python SDK
a2a-sdk 1.3.0, its client and server read in source and their traffic seen on loopback):

- A call is one JSON-RPC 2.0 request object POSTed to the interface's URL (the card's
  ``supportedInterfaces[].url`` with ``protocolBinding`` ``JSONRPC``; a 0.3 card's top-level ``url``). The SDK's
  client always sends an ``id`` (a UUID string) and ``params`` (an object); batches are not served (the SDK's server
  answers -32600).
- Revision **1.0** (the SDK's default, ``PROTOCOL_VERSION_CURRENT``) names its methods ``SendMessage``,
  ``SendStreamingMessage``, ``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``,
  ``CreateTaskPushNotificationConfig``, ``GetTaskPushNotificationConfig``, ``ListTaskPushNotificationConfigs``,
  ``DeleteTaskPushNotificationConfig`` and ``GetExtendedAgentCard``. Every request carries the header
  ``A2A-Version: 1.0``; a server reads a request without it as 0.3 and refuses the 1.0 methods (-32009).
  Extensions a client asks for travel in ``A2A-Extensions``. ``SendMessage``'s result is ``{"task": Task}`` or
  ``{"message": Message}``; a stream's event results are ``{"task"}``, ``{"message"}``, ``{"statusUpdate"}`` or
  ``{"artifactUpdate"}``. Parts are ``{"text": ...}`` (or ``raw``, ``url``, ``data``).
- Revision **0.3** names them ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe``, ``tasks/pushNotificationConfig/{set,get,list,delete}`` and
  ``agent/getAuthenticatedExtendedCard``; extensions in ``X-A2A-Extensions``. Results are the Task or Message
  itself (``kind`` ``task``/``message``; stream events also ``status-update``/``artifact-update``); parts are
  ``{"kind": "text", "text": ...}``.
- A streaming method (``SendStreamingMessage``, ``SubscribeToTask``, ``message/stream``, ``tasks/resubscribe``) is
  answered ``text/event-stream``: each event's ``data`` is one JSON-RPC response carrying the request's id; an
  error event is named ``error`` (the SDK's client raises on it). A refusal before the stream starts may come as one
  ``application/json`` response instead, which the SDK's client also reads.
- Errors: -32700 parse, -32600 invalid request, -32601 method not found, -32602 invalid params, -32603 internal;
  A2A's own: -32001 task not found, -32002 task not cancelable, -32003 push notifications not supported, -32004
  unsupported operation, -32005 content type not supported, -32006 invalid agent response, -32007 extended card
  not configured, -32008 extension support required, -32009 version not supported. The SDK's server answers every
  JSON-RPC error with HTTP 200; its client raises the error mapped from the code (and for a non-2xx status, an
  HTTP error without reading the body). The error raised, its codes shared with MCP (and -32010, the gateway's
  for a guardrail's deny, as MCP calls have it) and its body are ``gateway/http/jsonrpc.py``'s.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http import jsonrpc
from gateway.http.jsonrpc import GUARDRAIL_DENIED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR

VERSION_HEADER = "a2a-version"
#: headers of the client's request passed on to the agent (the revision spoken, the extensions asked for)
PASSED_HEADERS = ("a2a-version", "a2a-extensions", "x-a2a-extensions")

#: 1.0 and 0.3 names of the methods that send a message (their ``params.message`` is what input guardrails judge)
SENDING = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
#: methods answered with an event stream
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"})
#: methods whose ``params.id`` names a task (1.0 ``GetTaskRequest`` / ``CancelTaskRequest`` /
#: ``SubscribeToTaskRequest``, 0.3 ``TaskQueryParams`` / ``TaskIdParams``)
TASK_BY_ID = frozenset({"GetTask", "CancelTask", "SubscribeToTask", "tasks/get", "tasks/cancel",
                        "tasks/resubscribe"})



class Request(msgspec.Struct):
    """One JSON-RPC request as a client sent it (``params`` kept as it came)."""

    jsonrpc: Any = None
    id: Any = msgspec.UNSET
    method: Any = None
    params: Any = msgspec.UNSET


#: a JSON-RPC error to answer (``gateway/http/jsonrpc.py``): HTTP status 200, as A2A servers answer errors, unless
#: the gateway refused the caller (401, 403, 404, 413, 429, 503)
RpcError = jsonrpc.RpcError


_decoder = msgspec.json.Decoder(Request)
_encode = msgspec.json.encode


def decode(body: bytes) -> Request:
    """The request in ``body``: -32700 when it is not JSON, -32600 when it is not one JSON-RPC 2.0 request (an
    object with ``jsonrpc`` "2.0", a string ``method`` and an ``id`` that is a string or an integer)."""
    request = jsonrpc.decode_one(_decoder, body, "a JSON-RPC request object",
                                 "JSON-RPC batches are not supported: send one request per call")
    if request.jsonrpc != "2.0":
        raise RpcError(INVALID_REQUEST, 'jsonrpc must be "2.0"')
    if not isinstance(request.method, str) or not request.method:
        raise RpcError(INVALID_REQUEST, "method must be a non-empty string")
    if request.id is msgspec.UNSET or isinstance(request.id, bool) or not isinstance(request.id, (int, str)):
        raise RpcError(INVALID_REQUEST, "id must be a string or an integer (the gateway relays requests, not "
                                        "notifications)")
    if request.params is not msgspec.UNSET and not isinstance(request.params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object")
    return request


class _Id(msgspec.Struct):
    id: Any = None


_id_decoder = msgspec.json.Decoder(_Id)


def id_in(body: bytes) -> Any:
    """The id of whatever request object ``body`` holds (None when there is none, or it is no string or integer):
    what an error answered before the request is checked carries."""
    try:
        found = _id_decoder.decode(body).id
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        return None
    return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None


def id_of(request: Request | None) -> Any:
    """The id to answer ``request`` with (None when it had no usable one)."""
    if request is None or isinstance(request.id, bool) or not isinstance(request.id, (int, str)):
        return None
    return request.id


def encode(document: Any) -> bytes:
    return _encode(document)


def sse_event(data: bytes, name: bytes | None = None) -> bytes:
    """One JSON-RPC response as an event of an A2A stream (named ``error`` for an error, as the SDK names it)."""
    head = b"event: " + name + b"\n" if name else b""
    return head + b"data: " + data + b"\n\n"


# -- what the gateway reads of requests and answers ----------------------------------------------------------------


def params_of(request: Request) -> dict[str, Any]:
    return request.params if isinstance(request.params, dict) else {}


def task_of_request(request: Request) -> str | None:
    """The task a request names: ``params.id`` of a task method, ``params.message.taskId`` of a message that
    continues one."""
    params = params_of(request)
    if request.method in TASK_BY_ID:
        return _text(params.get("id"))
    message = params.get("message")
    return _text(message.get("taskId")) if isinstance(message, dict) else None


def task_of_result(result: Any) -> str | None:
    """The task id a result (or a stream event's result) names, in either revision."""
    if not isinstance(result, dict):
        return None
    task = result.get("task")
    if isinstance(task, dict):
        return _text(task.get("id"))
    for wrapper in ("statusUpdate", "artifactUpdate", "message"):
        inner = result.get(wrapper)
        if isinstance(inner, dict):
            return _text(inner.get("taskId"))
    if result.get("kind") == "task" or ("status" in result and "id" in result):
        return _text(result.get("id"))
    return _text(result.get("taskId"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class Head(msgspec.Struct):
    """What the relay reads of an agent's response: its id, result and error."""

    jsonrpc: Any = None
    id: Any = None
    result: Any = msgspec.UNSET
    error: Any = None


_head = msgspec.json.Decoder(Head)


def head_of(data: bytes) -> Head | None:
    """``data`` read as a JSON-RPC response: None unless it is an object with ``jsonrpc`` "2.0" and a ``result``
    or an ``error``."""
    try:
        head = _head.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if head.jsonrpc != "2.0" or (head.result is msgspec.UNSET and head.error is None):
        return None
    return head


def error_code(head: Head) -> int | None:
    """The code of an error response (``INTERNAL_ERROR`` when its error has none), None for a result."""
    if head.error is None:
        return None
    code = head.error.get("code") if isinstance(head.error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR


__all__ = ["GUARDRAIL_DENIED", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "PARSE_ERROR"]
