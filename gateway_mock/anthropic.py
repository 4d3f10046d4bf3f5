"""Mock of the anthropic Messages API (``POST /v1/messages``): validation, answers, SSE streams and errors.

Faithful where a gateway can get it wrong: ``x-api-key`` (401) and ``anthropic-version`` (400) are required,
``max_tokens`` is required, roles must be ``user``/``assistant`` and alternate, text blocks must be non-empty,
every ``tool_result`` must answer a ``tool_use`` of the previous turn (and every ``tool_use`` must be answered), and
``thinking.budget_tokens`` must be at least 1024 and below ``max_tokens``. Answers carry ``msg_…`` ids, content
blocks, ``stop_reason`` (``end_turn``, ``max_tokens``, ``stop_sequence``, ``tool_use``) and usage with the cache
fields (text under ``cache_control`` counts as read from the cache). Streams are named SSE events: message_start,
ping, content_block_start/delta/stop, message_delta, message_stop; scripted stream errors are ``event: error``.
Requests with ``thinking: {type: enabled}`` get a thinking block (with a signature) before the answer.
Tools: a ``tool_choice`` of ``{type: tool, name}`` or ``{type: any}`` forces a ``tool_use`` answer (the named tool;
for ``any`` the step's ``tool_name`` or the first tool) with no text beside it, and is refused alongside thinking
(as the API refuses forced tool use with extended thinking); otherwise a step's ``tool_call`` asks for one. The
tool's input is made from its ``input_schema`` (``schema_sample``) and streamed as ``input_json_delta`` pieces.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any

import msgspec

from gateway_mock.asgi import Send
from gateway_mock.kit import (
    MockRequest,
    count_tokens,
    end_stream,
    respond_json,
    retry_headers,
    sse,
    start_stream,
    stream_part,
)
from gateway_mock.schema_sample import sample

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
               403: "permission_error", 404: "not_found_error", 409: "conflict_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}
THINKING = ["The user greeted me; ", "I should answer briefly and kindly."]


def new_id(prefix: str) -> str:
    return prefix + "01" + secrets.token_hex(11)


def error_doc(type_: str, message: str) -> dict:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": new_id("req_")}


async def _reply_error(send: Send, status: int, type_: str, message: str, headers: list | None = None) -> None:
    doc = error_doc(type_, message)
    await respond_json(send, status, doc, [(b"request-id", doc["request_id"].encode()), *(headers or [])])


async def error(req: MockRequest, send: Send) -> None:
    step = req.step
    status = step.status
    await _reply_error(send, status, step.error_type or ERROR_TYPES.get(status, "api_error"),
                       step.message or f"mock upstream error {status}", retry_headers(step))


class Invalid(Exception):
    """A request the real API would refuse: status, error type and message."""

    def __init__(self, message: str, status: int = 400, type_: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.type = type_


def _blocks(content: Any, where: str) -> list[dict]:
    if isinstance(content, str):
        if not content:
            raise Invalid("messages: text content blocks must be non-empty")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Invalid(f"{where}.content: Input should be a valid list")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or "type" not in block:
            raise Invalid(f"{where}.content.{j}.type: Field required")
        if block["type"] == "text" and not block.get("text"):
            raise Invalid("messages: text content blocks must be non-empty")
    return content


def _check_tools(messages: list[list[dict]]) -> None:
    for i, blocks in enumerate(messages):
        previous = messages[i - 1] if i else []
        uses = {b.get("id") for b in previous if b["type"] == "tool_use"}
        results = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
        for j, tool_use_id in enumerate(results):
            if tool_use_id not in uses:
                raise Invalid(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                              f"{tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block "
                              "in the previous message.")
        missing = sorted(str(u) for u in uses if u not in results)
        if i and missing:
            raise Invalid(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                          f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` "
                          "block in the next message.")


def validate(req: MockRequest) -> tuple[dict, list[list[dict]]]:
    """The request body and its messages as block lists; raises Invalid like the real API."""
    if not req.headers.get("x-api-key"):
        raise Invalid("x-api-key header is required", 401, "authentication_error")
    if not req.headers.get("anthropic-version"):
        raise Invalid("anthropic-version: header is required")
    try:
        doc = req.json()
    except msgspec.DecodeError:
        raise Invalid("There was an error parsing the body of your request as JSON") from None
    if not isinstance(doc, dict):
        raise Invalid("Input should be a valid dictionary")
    for field in ("model", "max_tokens", "messages"):
        if field not in doc:
            raise Invalid(f"{field}: Field required")
    max_tokens = doc["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise Invalid("max_tokens: Input should be a valid integer greater than or equal to 0")
    temperature = doc.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        raise Invalid("temperature: Input should be less than or equal to 1")
    system = doc.get("system")
    if system is not None and not isinstance(system, (str, list)):
        raise Invalid("system: Input should be a valid string")
    messages = doc["messages"]
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: at least one message is required")
    turns: list[list[dict]] = []
    previous = None
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if role == previous:
            raise Invalid(f'messages: roles must alternate between "user" and "assistant", but found multiple '
                          f'"{role}" roles in a row')
        previous = role
        turns.append(_blocks(message.get("content"), f"messages.{i}"))
    _check_tools(turns)
    for i, tool in enumerate(doc.get("tools") or []):
        for field in ("name", "input_schema"):
            if field not in tool:
                raise Invalid(f"tools.{i}.{field}: Field required")
    choice = doc.get("tool_choice")
    if choice is not None:
        if choice.get("type") not in ("auto", "any", "tool", "none"):
            raise Invalid("tool_choice.type: Input tag does not match any of the expected tags: 'auto', 'any', "
                          "'tool', 'none'")
        if choice["type"] == "tool" and not choice.get("name"):
            raise Invalid("tool_choice.tool.name: Field required")
        names = [tool.get("name") for tool in doc.get("tools") or []]
        if choice["type"] in ("any", "tool") and not names:
            raise Invalid("tool_choice may only be specified while providing tools.")
        if choice["type"] == "tool" and choice["name"] not in names:
            raise Invalid(f"Tool '{choice['name']}' not found in provided tools")
    thinking = doc.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise Invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if max_tokens <= budget:
            raise Invalid("`max_tokens` must be greater than `thinking.budget_tokens`")
    if _wants_thinking(doc) and choice is not None and choice.get("type") in ("any", "tool"):
        raise Invalid("Thinking may not be enabled when tool_choice forces tool use.")
    return doc, turns


def _texts(value: Any, cached: list[str], plain: list[str]) -> None:
    if isinstance(value, str):
        plain.append(value)
        return
    for block in value or ():
        if not isinstance(block, dict):
            continue
        text = block.get("text") or (block.get("content") if isinstance(block.get("content"), str) else "")
        (cached if "cache_control" in block else plain).append(text or "")
        if isinstance(block.get("content"), list):
            _texts(block["content"], cached, plain)


def usage(doc: dict, output: str) -> dict:
    """Input tokens split like the real API: text under cache_control is read from the cache."""
    cached: list[str] = []
    plain: list[str] = []
    _texts(doc.get("system"), cached, plain)
    for message in doc["messages"]:
        _texts(message.get("content"), cached, plain)
    read = count_tokens(" ".join(cached)) if cached else 0
    return {"input_tokens": count_tokens(" ".join(plain)), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": read, "output_tokens": count_tokens(output) if output else 0}


def _answer(req: MockRequest, doc: dict) -> tuple[str, str, str | None]:
    """The reply text, the stop reason and the stop sequence (max_tokens and stop_sequences honoured)."""
    reply = req.reply_text()
    stop = None
    for sequence in doc.get("stop_sequences") or ():
        at = reply.find(sequence)
        if at >= 0:
            reply, stop = reply[:at], sequence
    if stop is not None:
        return reply, "stop_sequence", stop
    limit = doc["max_tokens"] * 4
    if len(reply) > limit:
        return reply[:limit], "max_tokens", None
    return reply, "end_turn", None


def _wants_thinking(doc: dict) -> bool:
    thinking = doc.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _signature(doc: dict) -> str:
    return hashlib.sha256(str(doc.get("model")).encode()).hexdigest() + "=="


def _tool(req: MockRequest, doc: dict) -> dict | None:
    """The tool the answer calls: the forced one, else (``any``, or a step asking for a call) the step's choice."""
    tools = doc.get("tools") or []
    choice = doc.get("tool_choice") or {}
    kind = choice.get("type")
    if not tools or kind == "none":
        return None
    if kind == "tool":
        return next(t for t in tools if t.get("name") == choice.get("name"))
    if kind != "any" and not req.step.tool_call:
        return None
    wanted = req.step.tool_name
    return next((t for t in tools if t.get("name") == wanted), tools[0])


def _tool_input(tool: dict) -> str:
    """The tool's input as JSON text made from its schema."""
    return json.dumps(sample(tool.get("input_schema")))


def _pieces(text: str) -> list[str]:
    """JSON text cut in about three pieces (cut at the first ``:``, then halfway through the rest)."""
    cut = text.find(":")
    if cut <= 0:
        return [text]
    rest = text[cut:]
    half = max(1, len(rest) // 2)
    return [text[:cut], rest[:half], rest[half:]] if len(rest) > 12 else [text[:cut], rest]


async def messages(req: MockRequest, send: Send) -> None:
    try:
        doc, _ = validate(req)
    except Invalid as exc:
        await _reply_error(send, exc.status, exc.type, str(exc))
        return
    tool = _tool(req, doc)
    if doc.get("stream"):
        await _stream(req, send, doc, tool)
        return
    content: list[dict] = []
    if _wants_thinking(doc):
        content.append({"type": "thinking", "thinking": "".join(THINKING), "signature": _signature(doc)})
    if tool is not None:
        output = _tool_input(tool)
        content.append({"type": "tool_use", "id": new_id("toolu_"), "name": tool["name"],
                        "input": json.loads(output)})
        stop_reason, stop_sequence = "tool_use", None
    else:
        output, stop_reason, stop_sequence = _answer(req, doc)
        if output:
            content.append({"type": "text", "text": output})
    await respond_json(send, 200, {
        "id": new_id("msg_"), "type": "message", "role": "assistant", "model": doc["model"], "content": content,
        "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage(doc, output),
    }, [(b"request-id", new_id("req_").encode())])


def _event(doc: dict) -> bytes:
    return sse(doc, doc["type"])


async def _stream(req: MockRequest, send: Send, doc: dict, tool: dict | None) -> None:
    step = req.step
    await start_stream(send)
    if step.stream_error == "first":
        await end_stream(send, _event(error_doc(step.error_type or "overloaded_error", step.message or "Overloaded")))
        return
    start_usage = usage(doc, "")
    start_usage["output_tokens"] = 1
    await stream_part(send, _event({"type": "message_start", "message": {
        "id": new_id("msg_"), "type": "message", "role": "assistant", "model": doc["model"], "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": start_usage}}))
    await stream_part(send, _event({"type": "ping"}))
    index = 0
    if _wants_thinking(doc):
        await stream_part(send, _event({"type": "content_block_start", "index": index,
                                        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
        for piece in THINKING:
            await stream_part(send, _event({"type": "content_block_delta", "index": index,
                                            "delta": {"type": "thinking_delta", "thinking": piece}}), step)
        await stream_part(send, _event({"type": "content_block_delta", "index": index,
                                        "delta": {"type": "signature_delta", "signature": _signature(doc)}}))
        await stream_part(send, _event({"type": "content_block_stop", "index": index}))
        index += 1
    if tool is not None:
        await stream_part(send, _event({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": new_id("toolu_"), "name": tool["name"], "input": {}}}))
        output = _tool_input(tool)
        for part in ("", *_pieces(output)):
            await stream_part(send, _event({"type": "content_block_delta", "index": index,
                                            "delta": {"type": "input_json_delta", "partial_json": part}}), step)
        stop_reason, stop_sequence = "tool_use", None
    else:
        output, stop_reason, stop_sequence = _answer(req, doc)
        pieces = req.reply_words() if output == req.reply_text() else [output]
        half = len(pieces) // 2
        await stream_part(send, _event({"type": "content_block_start", "index": index,
                                        "content_block": {"type": "text", "text": ""}}))
        for i, piece in enumerate(pieces):
            if i == half and step.stream_error == "middle":
                await end_stream(send, _event(error_doc(step.error_type or "overloaded_error",
                                                        step.message or "Overloaded")))
                return
            if i == half and step.stream_error == "cut":
                raise ConnectionResetError("mock cuts the stream")
            await stream_part(send, _event({"type": "content_block_delta", "index": index,
                                            "delta": {"type": "text_delta", "text": piece}}), step)
    await stream_part(send, _event({"type": "content_block_stop", "index": index}))
    await stream_part(send, _event({"type": "message_delta",
                                    "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                                    "usage": {"output_tokens": count_tokens(output) if output else 0}}))
    await end_stream(send, _event({"type": "message_stop"}))


async def count(req: MockRequest, send: Send) -> None:
    """``/messages/count_tokens``: the request without ``max_tokens``, answered ``{"input_tokens": n}``."""
    doc = req.json()
    if not isinstance(doc.get("model"), str) or not isinstance(doc.get("messages"), list):
        await _reply_error(send, 400, "invalid_request_error", "model and messages: Field required")
        return
    await respond_json(send, 200, {"input_tokens": usage(doc, "")["input_tokens"]})


ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/messages$"), messages),
    ("POST", re.compile(r"^(?:/v1)?/messages/count_tokens$"), count),
]
