"""The Messages API door (``POST /v1/messages``, ``POST /v1/messages/count_tokens``): anthropic's wire format over
every provider. See docs/front-doors.md#messages-api.

Facts relied on (anthropic's API reference "Messages", "Streaming messages", "Count message tokens", "Errors"):

- Request: ``model``, ``max_tokens`` (required), ``messages`` (``role`` user / assistant; ``content`` a string or
  blocks: ``text``, ``image`` with a ``base64`` (``media_type``, ``data``) or ``url`` source, ``tool_use``
  (``id``, ``name``, ``input``), ``tool_result`` (``tool_use_id``, ``content`` a string or text blocks,
  ``is_error``), ``thinking`` / ``redacted_thinking``), ``system`` (a string or text blocks), ``tools``
  (``name``, ``description``, ``input_schema``; server tools carry a versioned ``type``), ``tool_choice``
  (``auto`` / ``any`` / ``tool`` + ``name`` / ``none``, ``disable_parallel_tool_use``), ``stop_sequences``,
  ``temperature``, ``top_p``, ``top_k``, ``metadata.user_id``, ``thinking``, ``stream``; headers
  ``anthropic-version`` (required) and ``anthropic-beta``.
- Answer: ``{id: msg_…, type: message, role: assistant, model, content, stop_reason (end_turn, max_tokens,
  stop_sequence, tool_use, refusal), stop_sequence, usage {input_tokens, output_tokens}}``.
- Stream: SSE with ``event:`` equal to the data's ``type``: ``message_start`` (the message, empty content),
  ``ping``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta`` ``text``;
  ``input_json_delta`` ``partial_json``) / ``content_block_stop`` (``index``), ``message_delta`` (``delta``
  {``stop_reason``, ``stop_sequence``}, cumulative ``usage``), ``message_stop``; ``error`` events in-band.
- Errors: ``{"type": "error", "error": {"type", "message"}}``; 400 invalid_request_error, 401
  authentication_error, 402 billing_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
  rate_limit_error, 500 api_error, 504 timeout_error, 529 overloaded_error.
- count_tokens takes the request without ``max_tokens`` / ``stream`` and answers ``{"input_tokens": n}``.

Translation choices: a mid-conversation system message (``role: system`` among ``messages``, anthropic's
``mid-conversation-system`` beta; text blocks only) becomes a unified system message in place, which vendorA-wire
targets take as it is and cloudA, cloudC and anthropic adapters fold into their system prompt; ``max_tokens`` above
the model's known maximum (``gateway/providers/output_limits.py``) is cut to it and the answer says so in
``x-gateway-max-tokens-capped``. ``top_k`` and ``thinking`` are not sent to providers reached through unified chat
(chat has no field for either); ``metadata.user_id`` becomes ``user``; a tool_result's blocks become the tool
message's text; a server tool (a ``type`` other than ``custom``) is a 400 naming it. ``finish_reason`` stop /
length / tool_calls / content_filter become end_turn / max_tokens / tool_use / refusal.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.http.errors import GatewayError, InvalidRequest
from gateway.observability.estimate import tokens_for
from gateway.pipeline.dialects.base import Dialect as _Dialect
from gateway.pipeline.dialects.base import (
    DialectEvents,
    DoorRequest,
    NativeStream,
    chat_usage,
    conform,
    decode_object,
    encode,
    first_choice,
    optional,
    require,
    stream_with_usage,
    usage_of,
)
from gateway.providers.anthropic.response import ERROR_STATUS, stream_error
from gateway.providers.base import MESSAGES, MESSAGES_COUNT
from gateway.providers.output_limits import max_output_tokens
from gateway.schema.common import Usage
from gateway.schema.messages import MessagesRequest

#: gateway statuses that anthropic has no type for fall back to these
_TYPES = {status: name for name, status in ERROR_STATUS.items() if name}
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
         "content_filter": "refusal"}
_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


def error_type(status: int) -> str:
    if status in _TYPES:
        return _TYPES[status]
    return "invalid_request_error" if status < 500 else "api_error"


def error_doc(error: GatewayError) -> dict[str, Any]:
    """An error in anthropic's shape, with the gateway's top-level members beside ``error`` as on chat (a guardrail
    deny's ``hook_results``, the failing ``provider``)."""
    doc: dict[str, Any] = {"type": "error", "error": {"type": error_type(error.status), "message": error.message}}
    if error.extra:
        doc.update(error.extra)
    return doc


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise InvalidRequest(f"{where}[{i}] must be a text block", param=f"{where}[{i}]")
            parts.append(block["text"])
        return "\n".join(parts)
    raise InvalidRequest(f"{where} must be a string or a list of text blocks", param=where)


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    elif isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise InvalidRequest(f"{where}.source must be a base64 or url image source", param=f"{where}.source")
    return {"type": "image_url", "image_url": {"url": url}}


def _system_turn(message: dict[str, Any], i: int, messages: list[Any], out: list[dict[str, Any]]) -> None:
    """A mid-conversation system message (``role: system`` among the turns) as a unified system message in place;
    one with ``clear_at: next_user_message`` is left out once a later user turn exists, as anthropic does."""
    where = f"messages[{i}]"
    if message.get("clear_at") == "next_user_message" and any(
            isinstance(later, dict) and later.get("role") == "user" for later in messages[i + 1:]):
        return
    content = message.get("content")
    if isinstance(content, list):
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind != "text":
                raise InvalidRequest(f"{where}.content[{j}].type {kind!r} is not supported in a system message: "
                                     "this target is reached through translation", param=f"{where}.content[{j}].type")
    text = _text(content, f"{where}.content")
    if text:
        out.append({"role": "system", "content": text})


def _turn(message: Any, i: int, out: list[dict[str, Any]]) -> None:
    where = f"messages[{i}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"{where} must be an object", param=where)
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise InvalidRequest(f"{where}.role must be 'user' or 'assistant' (or 'system' after the first turn)",
                             param=f"{where}.role")
    content = message.get("content")
    if isinstance(content, str):
        out.append({"role": role, "content": content})
        return
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}.content must be a string or a list of blocks", param=f"{where}.content")
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and role == "user":
            parts.append(_image(block, at))
        elif kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise InvalidRequest(f"{at} needs id and name", param=at)
            calls.append({"id": block["id"], "type": "function", "function": {
                "name": block["name"], "arguments": encode(block.get("input") or {}).decode()}})
        elif kind == "tool_result" and role == "user":
            if not isinstance(block.get("tool_use_id"), str):
                raise InvalidRequest(f"{at}.tool_use_id is required", param=f"{at}.tool_use_id")
            result = block.get("content", "")
            text = _text(result, f"{at}.content") if result else ""
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            raise InvalidRequest(f"{at}.type {kind!r} is not supported in a {role} message", param=f"{at}.type")
    if role == "assistant":
        turn: dict[str, Any] = {"role": "assistant",
                                "content": "".join(p["text"] for p in parts) if parts else None}
        if calls:
            turn["tool_calls"] = calls
        if parts or calls:
            out.append(turn)
    elif parts:
        out.append({"role": "user", "content": parts})


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InvalidRequest("tools must be a list", param="tools")
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise InvalidRequest(f"{where}.name is required", param=f"{where}.name")
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise InvalidRequest(f"{where}: server tool {kind!r} runs only on anthropic; this target is reached "
                                 "through translation", param=f"{where}.type")
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("input_schema") or {
            "type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, chat: dict[str, Any]) -> None:
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise InvalidRequest("tool_choice.type must be auto, any, tool or none", param="tool_choice.type")
    kind = choice["type"]
    if kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise InvalidRequest("tool_choice.name is required with type tool", param="tool_choice.name")
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        chat["tool_choice"] = _CHOICE[kind]
    if choice.get("disable_parallel_tool_use") is True and kind != "none":
        chat["parallel_tool_calls"] = False


class MessagesDialect(_Dialect):
    """anthropic's Messages API (see the module docstring)."""

    name = MESSAGES
    native_endpoint = MESSAGES
    native_path = "/messages"
    native_headers = ("anthropic-version", "anthropic-beta")
    #: count_tokens needs no max_tokens and is never streamed
    counting = False

    def parse(self, body: bytes) -> DoorRequest:
        doc = decode_object(body)
        model = require(doc, "model", str, "a string")
        messages = require(doc, "messages", list, "a list of messages")
        if not messages:
            raise InvalidRequest("messages must not be empty", param="messages")
        stream = False
        if not self.counting:
            max_tokens = require(doc, "max_tokens", int, "an integer")
            if max_tokens < 1:
                raise InvalidRequest("max_tokens must be at least 1", param="max_tokens")
            stream = bool(optional(doc, "stream", bool, "a boolean"))
        for name in ("temperature", "top_p"):
            optional(doc, name, (int, float), "a number")
        optional(doc, "stop_sequences", list, "a list of strings")
        metadata = optional(doc, "metadata", dict, "an object")
        if metadata is not None and not isinstance(metadata.get("user_id"), (str, type(None))):
            raise InvalidRequest("metadata.user_id must be a string", param="metadata.user_id")
        shape = conform(doc, MessagesRequest)  # forwarded or translated, the same check
        if shape.messages[0].role == "system":
            raise InvalidRequest("messages[0].role must be 'user' or 'assistant' (a system message may follow "
                                 "the first turn; use system for the system prompt)", param="messages[0].role")
        return DoorRequest(doc, model, stream)

    def to_chat(self, request: DoorRequest) -> dict[str, Any]:
        doc = request.doc
        out: list[dict[str, Any]] = []
        system = doc.get("system")
        if system:
            out.append({"role": "system", "content": _text(system, "system")})
        messages = doc["messages"]
        for i, message in enumerate(messages):
            if i and isinstance(message, dict) and message.get("role") == "system":  # never first, as anthropic
                _system_turn(message, i, messages, out)
            else:
                _turn(message, i, out)
        chat: dict[str, Any] = {"model": request.model, "messages": out}
        max_tokens = doc.get("max_tokens")
        if max_tokens is not None:
            limit = max_output_tokens(request.model)
            if limit is not None and max_tokens > limit:
                request.capped = f"{max_tokens}->{limit}".encode()
                max_tokens = limit
            chat["max_tokens"] = max_tokens
        for name in ("temperature", "top_p"):
            if doc.get(name) is not None:
                chat[name] = doc[name]
        if doc.get("stop_sequences"):
            chat["stop"] = doc["stop_sequences"]
        if doc.get("tools"):
            chat["tools"] = _tools(doc["tools"])
        if doc.get("tool_choice") is not None:
            _tool_choice(doc["tool_choice"], chat)
            if chat.get("tool_choice") == "none" and "tools" not in chat:
                del chat["tool_choice"]
        metadata = doc.get("metadata")
        if metadata and metadata.get("user_id") is not None:
            chat["user"] = metadata["user_id"]
        return stream_with_usage(request, chat)

    def answer(self, request: DoorRequest, chat: bytes) -> bytes:
        doc, choice, message = first_choice(chat)
        content: list[dict[str, Any]] = []
        if message.get("content"):
            content.append({"type": "text", "text": message["content"]})
        for call in message.get("tool_calls") or ():
            content.append(_tool_use(call))
        prompt, completion = chat_usage(doc.get("usage"))
        answer = {
            "id": "msg_" + str(doc.get("id", "")).removeprefix("chatcmpl-"), "type": "message", "role": "assistant",
            "model": doc.get("model") or request.model, "content": content,
            "stop_reason": _STOP.get(choice.get("finish_reason") or "stop", "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": completion},
        }
        if "hook_results" in doc:  # the guardrails' verdicts, as on chat
            answer["hook_results"] = doc["hook_results"]
        return encode(answer)

    def events(self, request: DoorRequest) -> DialectEvents:
        return MessageEvents(request.model or "")

    def native_usage(self, doc: dict[str, Any]) -> Usage | None:
        return usage_of(doc.get("usage"), "input_tokens", "output_tokens")

    def native_event(self, name: bytes | None, data: bytes, stream: NativeStream) -> GatewayError | None:
        if name == b"message_start":
            # an opening count (output_tokens 1): the usage only with message_delta's, so a stream that ends before
            # it (the client left) is estimated from what was relayed
            found = usage_of((decode_object(data).get("message") or {}).get("usage"), "input_tokens",
                             "output_tokens")
            if found is not None:
                stream.parts["input"] = found.prompt_tokens
        elif name == b"message_delta":
            found = usage_of(decode_object(data).get("usage"), "input_tokens", "output_tokens")
            if found is not None:
                prompt = stream.parts.get("input", found.prompt_tokens) or found.prompt_tokens
                stream.usage = Usage(prompt, found.completion_tokens, prompt + found.completion_tokens)
        elif name == b"error":
            return stream_error(data)
        return None

    def stream_error(self, error: GatewayError) -> bytes:
        return _event("error", error_doc(error))

    def error_body(self, error: GatewayError) -> bytes:
        return encode(error_doc(error))


class CountTokensDialect(MessagesDialect):
    """``POST /v1/messages/count_tokens``: forwarded to anthropic, estimated elsewhere."""

    name = MESSAGES_COUNT
    native_endpoint = MESSAGES_COUNT
    native_path = "/messages/count_tokens"
    counting = True

    def estimate(self, request: DoorRequest) -> bytes | None:
        text = encode({k: request.doc.get(k) for k in ("system", "messages", "tools")}).decode()
        return encode({"input_tokens": tokens_for(len(text))})


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        value = decode_object(arguments.encode())
    except InvalidRequest:
        value = {}
    return {"type": "tool_use", "id": call.get("id") or "", "name": function.get("name") or "", "input": value}


def _event(name: str, doc: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + encode(doc) + b"\n\n"


class MessageEvents(DialectEvents):
    """Unified chat chunks as a Messages stream: ``message_start`` and a ``ping`` first, a text block while text
    comes, a tool_use block per tool call, ``message_delta`` with the stop reason and usage, ``message_stop``."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.index = -1
        self.open: str | None = None  # "text" or the unified tool-call index as "tool:<n>"
        self.stop = "end_turn"
        self.final: bytes | None = None

    def _start(self, doc: dict[str, Any], out: list[bytes]) -> None:
        self.started = True
        message_id = "msg_" + str(doc.get("id") or f"{time.time_ns():x}").removeprefix("chatcmpl-")
        out.append(_event("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": doc.get("model") or self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}}))
        out.append(_event("ping", {"type": "ping"}))

    def _close(self, out: list[bytes]) -> None:
        if self.open is not None:
            out.append(_event("content_block_stop", {"type": "content_block_stop", "index": self.index}))
            self.open = None

    def chunk(self, doc: dict[str, Any], out: list[bytes]) -> None:
        if not self.started:
            self._start(doc, out)
        for choice in doc.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                if self.open != "text":
                    self._close(out)
                    self.index += 1
                    self.open = "text"
                    out.append(_event("content_block_start", {"type": "content_block_start", "index": self.index,
                                                              "content_block": {"type": "text", "text": ""}}))
                out.append(_event("content_block_delta", {"type": "content_block_delta", "index": self.index,
                                                          "delta": {"type": "text_delta", "text": text}}))
            for call in delta.get("tool_calls") or ():
                key = f"tool:{call.get('index', 0)}"
                function = call.get("function") or {}
                if self.open != key:
                    self._close(out)
                    self.index += 1
                    self.open = key
                    out.append(_event("content_block_start", {
                        "type": "content_block_start", "index": self.index, "content_block": {
                            "type": "tool_use", "id": call.get("id") or "", "name": function.get("name") or "",
                            "input": {}}}))
                if function.get("arguments"):
                    out.append(_event("content_block_delta", {
                        "type": "content_block_delta", "index": self.index,
                        "delta": {"type": "input_json_delta", "partial_json": function["arguments"]}}))
            if choice.get("finish_reason"):
                self.stop = _STOP.get(choice["finish_reason"], "end_turn")

    def end(self, usage: Usage | None, out: list[bytes]) -> None:
        if not self.started:
            self._start({}, out)
        self._close(out)
        prompt, completion = chat_usage(usage)
        out.append(_event("message_delta", {"type": "message_delta",
                                            "delta": {"stop_reason": self.stop, "stop_sequence": None},
                                            "usage": {"input_tokens": prompt, "output_tokens": completion}}))
        out.append(_event("message_stop", {"type": "message_stop"}))

    def error(self, error: GatewayError) -> bytes:
        return _event("error", error_doc(error))
