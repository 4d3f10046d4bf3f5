"""The Responses API door (``POST /v1/responses``): vendorA's Responses wire format over every provider, with
conversation state for translated responses. See docs/front-doors.md#responses-api.

Facts relied on (vendorA's API reference "Responses", "Streaming responses", "Conversation state", and the
openai-python SDK's response types and stream accumulator):

- Request: ``model``, ``input`` (a string, or items: messages ``{role, content}`` with ``input_text`` /
  ``input_image`` (``image_url``, ``detail``) / ``output_text`` parts, ``function_call`` (``call_id``, ``name``,
  ``arguments``), ``function_call_output`` (``call_id``, ``output``)), ``instructions``, ``tools`` (function tools
  ``{type: function, name, description, parameters, strict}``; built-in tools such as ``web_search``,
  ``file_search``, ``code_interpreter`` run on vendorA's side), ``tool_choice`` (``auto`` / ``none`` /
  ``required`` / ``{type: function, name}``), ``text.format`` (``text``, ``json_object``, ``json_schema`` with
  ``name``, ``schema``, ``strict``), ``max_output_tokens``, ``temperature``, ``top_p``, ``reasoning.effort``,
  ``metadata``, ``parallel_tool_calls``, ``store`` (default true), ``previous_response_id``, ``stream``, ``user``.
- Answer: ``{id: resp_…, object: response, created_at, status (completed / incomplete), error,
  incomplete_details ({reason: max_output_tokens}), instructions, max_output_tokens, model, output,
  parallel_tool_calls, previous_response_id, reasoning, store, temperature, text, tool_choice, tools, top_p,
  truncation, usage {input_tokens, input_tokens_details.cached_tokens, output_tokens,
  output_tokens_details.reasoning_tokens, total_tokens}, user, metadata}``; output items ``message`` (``id``,
  ``status``, ``role: assistant``, ``content: [{type: output_text, text, annotations}]``) and ``function_call``
  (``id``, ``call_id``, ``name``, ``arguments``, ``status``).
- Stream: SSE with ``event:`` equal to the data's ``type``, every event with a ``sequence_number`` counting from 0:
  ``response.created``, ``response.in_progress``, ``response.output_item.added`` (``output_index``, ``item``),
  ``response.content_part.added`` (``item_id``, ``output_index``, ``content_index``, ``part``),
  ``response.output_text.delta`` (``delta``), ``response.output_text.done`` (``text``),
  ``response.content_part.done``, ``response.function_call_arguments.delta`` / ``.done`` (``arguments``),
  ``response.output_item.done``, then ``response.completed`` (or ``response.incomplete``) with the whole response;
  ``error`` (``code``, ``message``, ``param``) in-band. The SDK checks the response id stays the same across
  lifecycle events and that output items keep their ids. No ``[DONE]``.
- Errors are vendorA's ``{"error": {"message", "type", "param", "code"}}`` (the gateway's own envelope).

Conversation state: a translated response with ``store`` (default true) is kept in the state store under the
caller's workspace for ``STORED_TTL_MS``; ``previous_response_id`` sends its input and output before the new input.
A forwarded response is stored by its provider (retrieve is forwarded). Only ids of the form the gateway makes
(``is_stored_id``: ``resp_`` and letters, digits, ``_`` or ``-``, never a ``:``) are looked up in the store, so the
key ``<workspace>:<id>`` splits one way only and no id names a key of another workspace.
"""

from __future__ import annotations

import re
import time
from typing import Any

from gateway.http.errors import GatewayError, InvalidRequest, NotFound
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
from gateway.process_ids import TRACE_IDS
from gateway.providers.base import RESPONSES, upstream_error
from gateway.schema.common import Usage, check_metadata
from gateway.schema.responses import ResponsesRequest

#: how long a translated response stays retrievable and continuable (30 days, as vendorA keeps them)
STORED_TTL_MS = 30 * 24 * 3600 * 1000
STORED_PREFIX = "responses:stored:"
_EFFORTS = ("minimal", "low", "medium", "high")


#: the ids the gateway gives the responses it stores: no ``:``, so ``<workspace>:<id>`` is unambiguous
_STORED_ID = re.compile(r"resp_[A-Za-z0-9_-]{1,64}")


def is_stored_id(response_id: object) -> bool:
    """Whether ``response_id`` has the form of an id the gateway stores (anything else is never looked up)."""
    return isinstance(response_id, str) and _STORED_ID.fullmatch(response_id) is not None


def stored_key(workspace: str | None, response_id: str) -> str:
    """The state-store key of a stored response; ``response_id`` must pass ``is_stored_id`` (ValueError)."""
    if not is_stored_id(response_id):
        raise ValueError(f"not a stored response id: {response_id!r}")
    return f"{STORED_PREFIX}{workspace or '-'}:{response_id}"


def new_id(prefix: str) -> str:
    return prefix + TRACE_IDS.next_hex()


def _part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str):
            raise InvalidRequest(f"{where}.image_url is required (file ids reach only vendorA)",
                                 param=f"{where}.image_url")
        image: dict[str, Any] = {"url": url}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise InvalidRequest(f"{where}.type {kind!r} is not supported", param=f"{where}.type")


def input_messages(items: Any) -> list[dict[str, Any]]:
    """Responses ``input`` as unified chat messages."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where} must be an object", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise InvalidRequest(f"{where}.role must be user, assistant, system or developer",
                                     param=f"{where}.role")
            content = item.get("content")
            if isinstance(content, str):
                out.append({"role": role, "content": content})
            elif isinstance(content, list):
                parts = [_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
                if role == "user":
                    out.append({"role": role, "content": parts})
                else:
                    out.append({"role": role, "content": "".join(p.get("text", "") for p in parts)})
            else:
                raise InvalidRequest(f"{where}.content must be a string or a list of parts",
                                     param=f"{where}.content")
        elif kind == "function_call":
            for name in ("call_id", "name", "arguments"):
                if not isinstance(item.get(name), str):
                    raise InvalidRequest(f"{where}.{name} is required", param=f"{where}.{name}")
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise InvalidRequest(f"{where}.call_id is required", param=f"{where}.call_id")
            output = item.get("output")
            text = output if isinstance(output, str) else encode(output).decode()
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
        elif kind == "reasoning":
            continue
        else:
            raise InvalidRequest(f"{where}.type {kind!r} is not supported when translated", param=f"{where}.type")
    return out


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise InvalidRequest(f"tools[{i}]: the built-in tool {kind!r} runs only on providers that serve the "
                                 "Responses API (vendorA, cloudB); this target is reached through translation",
                                 param=f"tools[{i}].type")
        if not isinstance(tool.get("name"), str):
            raise InvalidRequest(f"tools[{i}].name is required", param=f"tools[{i}].name")
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool.get("parameters") or {
            "type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        if isinstance(tool.get("strict"), bool):
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _format(fmt: Any) -> dict[str, Any] | None:
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise InvalidRequest("text.format.schema is required with json_schema", param="text.format.schema")
        schema: dict[str, Any] = {"name": fmt.get("name") or "output", "schema": fmt["schema"]}
        if isinstance(fmt.get("strict"), bool):
            schema["strict"] = fmt["strict"]
        return {"type": "json_schema", "json_schema": schema}
    raise InvalidRequest(f"text.format.type must be text, json_object or json_schema, got {kind!r}",
                         param="text.format.type")


def output_items(message: dict[str, Any], message_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.get("content"):
        items.append({"type": "message", "id": message_id, "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append({"type": "function_call", "id": "fc_" + str(call.get("id") or ""), "call_id": call.get("id"),
                      "name": function.get("name"), "arguments": function.get("arguments") or "",
                      "status": "completed"})
    return items


def response_doc(request: DoorRequest, response_id: str, created: int, status: str, output: list[dict[str, Any]],
                 usage: tuple[int, int] | None, model: str | None = None) -> dict[str, Any]:
    """A response object with the request's settings (or their defaults)."""
    doc = request.doc
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    reasoning: dict[str, Any] = doc["reasoning"] if isinstance(doc.get("reasoning"), dict) else {}
    return {
        "id": response_id, "object": "response", "created_at": created, "status": status, "error": None,
        "incomplete_details": incomplete, "instructions": doc.get("instructions"),
        "max_output_tokens": doc.get("max_output_tokens"), "model": model or request.model, "output": output,
        "parallel_tool_calls": doc.get("parallel_tool_calls", True),
        "previous_response_id": doc.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": None}, "store": doc.get("store", True),
        "temperature": doc.get("temperature", 1.0), "text": doc.get("text") or {"format": {"type": "text"}},
        "tool_choice": doc.get("tool_choice", "auto"), "tools": doc.get("tools") or [],
        "top_p": doc.get("top_p", 1.0), "truncation": "disabled",
        "usage": None if usage is None else {
            "input_tokens": usage[0], "input_tokens_details": {"cached_tokens": 0}, "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage[0] + usage[1]},
        "user": doc.get("user"), "metadata": doc.get("metadata") or {},
    }


class ResponsesDialect(_Dialect):
    """vendorA's Responses API (see the module docstring)."""

    name = "responses"
    native_endpoint = RESPONSES
    native_path = "/responses"

    def parse(self, body: bytes) -> DoorRequest:
        doc = decode_object(body)
        model = require(doc, "model", str, "a string")
        items = require(doc, "input", (str, list), "a string or a list of input items")
        if isinstance(items, list) and not items:
            raise InvalidRequest("input must not be empty", param="input")
        optional(doc, "instructions", str, "a string")
        optional(doc, "tools", list, "a list of tools")
        optional(doc, "max_output_tokens", int, "an integer")
        for name in ("temperature", "top_p"):
            optional(doc, name, (int, float), "a number")
        optional(doc, "store", bool, "a boolean")
        optional(doc, "previous_response_id", str, "a string")
        check_metadata(doc.get("metadata"))
        text = optional(doc, "text", dict, "an object")
        if text is not None:
            _format(text.get("format"))
        reasoning = optional(doc, "reasoning", dict, "an object")
        if reasoning is not None and reasoning.get("effort") not in (None, *_EFFORTS):
            raise InvalidRequest(f"reasoning.effort must be one of {', '.join(_EFFORTS)}", param="reasoning.effort")
        stream = bool(optional(doc, "stream", bool, "a boolean"))
        _check_shape(conform(doc, ResponsesRequest))  # forwarded or translated, the same check
        return DoorRequest(doc, model, stream)

    async def prepare(self, request: DoorRequest, ctx: Any, store: Any) -> None:
        previous = request.doc.get("previous_response_id")
        if previous is None or store is None:
            return
        data = await store.get(stored_key(ctx.workspace, previous)) if is_stored_id(previous) else None
        # not stored here: a response of a provider serving the Responses API, which continues it when forwarded;
        # translating such a request is a 404 (to_chat)
        request.extra = decode_object(data) if data is not None else {"unknown": previous}

    def to_chat(self, request: DoorRequest) -> dict[str, Any]:
        doc = request.doc
        messages: list[dict[str, Any]] = []
        if doc.get("instructions"):
            messages.append({"role": "system", "content": doc["instructions"]})
        if request.extra is not None:
            if "unknown" in request.extra:
                raise NotFound(f"previous_response_id: no stored response '{request.extra['unknown']}' (a response "
                               "forwarded to its provider is continued there: route the request to that provider)",
                               param="previous_response_id")
            messages.extend(request.extra.get("chat") or [])
        messages.extend(input_messages(doc["input"]))
        chat: dict[str, Any] = {"model": request.model, "messages": messages}
        if doc.get("tools"):
            chat["tools"] = _tools(doc["tools"])
        choice = doc.get("tool_choice")
        if isinstance(choice, str) and choice in ("auto", "none", "required") and "tools" in chat:
            chat["tool_choice"] = choice
        elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif choice is not None and not isinstance(choice, str):
            raise InvalidRequest("tool_choice must be auto, none, required or a function choice",
                                 param="tool_choice")
        text = doc.get("text")
        if isinstance(text, dict):
            fmt = _format(text.get("format"))
            if fmt is not None:
                chat["response_format"] = fmt
        if doc.get("max_output_tokens") is not None:
            chat["max_tokens"] = doc["max_output_tokens"]
        for name in ("temperature", "top_p", "parallel_tool_calls", "user"):
            if doc.get(name) is not None:
                chat[name] = doc[name]
        reasoning = doc.get("reasoning")
        if isinstance(reasoning, dict) and reasoning.get("effort"):
            chat["reasoning_effort"] = reasoning["effort"]
        return stream_with_usage(request, chat)

    def answer(self, request: DoorRequest, chat: bytes) -> bytes:
        doc, choice, message = first_choice(chat)
        status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
        output = output_items(message, new_id("msg_"))
        answer = response_doc(request, new_id("resp_"), int(time.time()), status, output,
                              chat_usage(doc.get("usage")), doc.get("model"))
        if "hook_results" in doc:  # the guardrails' verdicts, as on chat
            answer["hook_results"] = doc["hook_results"]
        return encode(answer)

    async def answered(self, request: DoorRequest, ctx: Any, store: Any, answer: bytes) -> None:
        if store is None or request.doc.get("store") is False:
            return
        response = decode_object(answer)
        if not is_stored_id(response.get("id")):
            return
        chat = list((request.extra or {}).get("chat") or [])
        chat.extend(input_messages(request.doc["input"]))
        for item in response.get("output") or ():
            if item.get("type") == "message":
                chat.append({"role": "assistant", "content": "".join(
                    p.get("text", "") for p in item.get("content") or ())})
            elif item.get("type") == "function_call":
                chat.extend(input_messages([{"type": "function_call", "call_id": item["call_id"],
                                             "name": item["name"], "arguments": item["arguments"]}]))
        items = list((request.extra or {}).get("items") or [])
        given = request.doc["input"]
        for item in ([{"role": "user", "content": given}] if isinstance(given, str) else given):
            items.append(_input_item(item))
        kept = {"response": response, "chat": chat, "items": items}
        await store.set(stored_key(ctx.workspace, response["id"]), encode(kept), STORED_TTL_MS)

    def events(self, request: DoorRequest) -> DialectEvents:
        return ResponseEvents(request)

    def native_usage(self, doc: dict[str, Any]) -> Usage | None:
        return usage_of(doc.get("usage"), "input_tokens", "output_tokens")

    def native_event(self, name: bytes | None, data: bytes, stream: NativeStream) -> GatewayError | None:
        if name in (b"response.completed", b"response.incomplete"):
            response = decode_object(data).get("response") or {}
            stream.usage = usage_of(response.get("usage"), "input_tokens", "output_tokens")
        elif name == b"error" or name == b"response.failed":
            doc = decode_object(data)
            error = doc.get("error") or (doc.get("response") or {}).get("error") or doc
            return upstream_error(stream.provider, 502, b"", message=str(error.get("message") or "stream error"),
                                  code=error.get("code"))
        return None

    def stream_error(self, error: GatewayError) -> bytes:
        return _event("error", {"type": "error", "code": error.code or error.type, "message": error.message,
                                "param": error.param, "sequence_number": 0})


def _check_shape(shape: ResponsesRequest) -> None:
    """What the request's shape cannot say by types alone: a message item has a role and content, a function tool
    a name."""
    if not isinstance(shape.input, str):
        for i, item in enumerate(shape.input):
            if item.type == "message":
                for name in ("role", "content"):
                    if getattr(item, name) is None:
                        raise InvalidRequest(f"input[{i}].{name} is required", param=f"input[{i}].{name}")
    for i, tool in enumerate(shape.tools or ()):
        if tool.type == "function" and tool.name is None:
            raise InvalidRequest(f"tools[{i}].name is required", param=f"tools[{i}].name")


def _input_item(item: dict[str, Any]) -> dict[str, Any]:
    """An input item as the input-items list shows it: with an id, a message's text as ``input_text`` parts."""
    if item.get("type", "message") != "message":
        return {"id": new_id("item_"), **item}
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    return {"id": new_id("msg_"), "type": "message", "status": "completed", **item, "content": content}


def _event(name: str, doc: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + encode(doc) + b"\n\n"


class ResponseEvents(DialectEvents):
    """Unified chat chunks as a Responses stream (the event sequence of the module docstring)."""

    def __init__(self, request: DoorRequest) -> None:
        self.request = request
        self.seq = 0
        self.id = new_id("resp_")
        self.created = int(time.time())
        self.started = False
        self.items: list[dict[str, Any]] = []  # output items in output_index order, as they grow
        self.text_at: int | None = None  # output index of the message item
        self.calls: dict[int, int] = {}  # unified tool-call index -> output index
        self.finish: str | None = None
        self.model: str | None = None
        self.final: bytes | None = None

    def _emit(self, name: str, doc: dict[str, Any], out: list[bytes]) -> None:
        doc["type"] = name
        doc["sequence_number"] = self.seq
        self.seq += 1
        out.append(_event(name, doc))

    def _response(self, status: str, usage: tuple[int, int] | None = None) -> dict[str, Any]:
        return response_doc(self.request, self.id, self.created, status, self.items if status != "in_progress" else
                            [], usage, self.model)

    def chunk(self, doc: dict[str, Any], out: list[bytes]) -> None:
        if not self.started:
            self.started = True
            self.model = doc.get("model")
            self._emit("response.created", {"response": self._response("in_progress")}, out)
            self._emit("response.in_progress", {"response": self._response("in_progress")}, out)
        for choice in doc.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                if self.text_at is None:
                    self.text_at = len(self.items)
                    item: dict[str, Any] = {"type": "message", "id": new_id("msg_"), "status": "in_progress",
                                            "role": "assistant", "content": []}
                    self.items.append(item)
                    self._emit("response.output_item.added", {"output_index": self.text_at, "item": dict(item)}, out)
                    part = {"type": "output_text", "text": "", "annotations": []}
                    item["content"].append(part)
                    self._emit("response.content_part.added", {"item_id": item["id"], "output_index": self.text_at,
                                                               "content_index": 0, "part": dict(part)}, out)
                item = self.items[self.text_at]
                item["content"][0]["text"] += text
                self._emit("response.output_text.delta", {"item_id": item["id"], "output_index": self.text_at,
                                                          "content_index": 0, "delta": text, "logprobs": []}, out)
            for call in delta.get("tool_calls") or ():
                index = call.get("index", 0)
                function = call.get("function") or {}
                at = self.calls.get(index)
                if at is None:
                    at = self.calls[index] = len(self.items)
                    call_id = call.get("id") or new_id("call_")
                    item = {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id,
                            "name": function.get("name") or "", "arguments": "", "status": "in_progress"}
                    self.items.append(item)
                    self._emit("response.output_item.added", {"output_index": at, "item": dict(item)}, out)
                item = self.items[at]
                if function.get("arguments"):
                    item["arguments"] += function["arguments"]
                    self._emit("response.function_call_arguments.delta", {
                        "item_id": item["id"], "output_index": at, "delta": function["arguments"]}, out)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def end(self, usage: Usage | None, out: list[bytes]) -> None:
        if not self.started:
            self.chunk({}, out)
        for at, item in enumerate(self.items):
            item["status"] = "completed"
            if item["type"] == "message":
                part = item["content"][0]
                self._emit("response.output_text.done", {"item_id": item["id"], "output_index": at,
                                                         "content_index": 0, "text": part["text"], "logprobs": []},
                           out)
                self._emit("response.content_part.done", {"item_id": item["id"], "output_index": at,
                                                          "content_index": 0, "part": part}, out)
            else:
                self._emit("response.function_call_arguments.done", {
                    "item_id": item["id"], "output_index": at, "name": item["name"],
                    "arguments": item["arguments"]}, out)
            self._emit("response.output_item.done", {"output_index": at, "item": item}, out)
        status = "incomplete" if self.finish == "length" else "completed"
        response = self._response(status, chat_usage(usage))
        self._emit(f"response.{status}", {"response": response}, out)
        self.final = encode(response)

    def error(self, error: GatewayError) -> bytes:
        doc = {"type": "error", "code": error.code or error.type, "message": error.message, "param": error.param,
               "sequence_number": self.seq}
        self.seq += 1
        return _event("error", doc)
