"""Unified chat and text-completion requests -> the anthropic Messages request body (one encode per request)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from gateway.http.errors import InvalidRequest
from gateway.providers.fields import FieldTable, above_one, is_true, present
from gateway.providers.structured_output import OutputTool, output_tool
from gateway.schema.chat import ChatRequest, Message
from gateway.schema.completions import CompletionRequest

#: ``max_tokens`` is required upstream; sent when the request has neither max_completion_tokens nor max_tokens
DEFAULT_MAX_TOKENS = 4096

_encode = msgspec.json.encode
_decode = msgspec.json.decode
_NO_LOGPROBS = "logprobs is not supported by anthropic (its answers carry no log probabilities)"

#: the chat fields anthropic takes (as they are or translated) and refuses; any other field is dropped
CHAT_FIELDS = FieldTable(
    taken=frozenset({"messages", "model", "max_tokens", "max_completion_tokens", "stop", "stream", "stream_options",
                     "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "user",
                     "response_format", "thinking"}),
    refused={
        "n": (above_one, "n > 1 is not supported by anthropic"),
        "logprobs": (is_true, _NO_LOGPROBS),
        "top_logprobs": (present, "top_logprobs is not supported by anthropic (its answers carry no log "
                                  "probabilities)"),
        "functions": (present, "functions and function_call are deprecated and not supported by anthropic; use "
                               "tools"),
        "function_call": (present, "functions and function_call are deprecated and not supported by anthropic; "
                                   "use tools"),
    },
)
#: the text completion fields anthropic takes and refuses; any other field is dropped
COMPLETION_FIELDS = FieldTable(
    taken=frozenset({"model", "prompt", "max_tokens", "stop", "stream", "stream_options", "temperature", "top_p",
                     "user"}),
    refused={
        "n": (above_one, "n > 1 is not supported by anthropic"),
        "best_of": (above_one, "best_of > 1 is not supported by anthropic"),
        "echo": (is_true, "echo is not supported by anthropic"),
        "suffix": (is_true, "suffix is not supported by anthropic"),
        "logprobs": (present, _NO_LOGPROBS),
    },
)


class MessageParam(msgspec.Struct, gc=False):
    role: str
    content: str | list[dict[str, Any]]


class MessagesBody(msgspec.Struct, omit_defaults=True, gc=False):
    """The Messages API request body; unset fields are left out."""

    model: str
    max_tokens: int
    messages: list[MessageParam]
    system: str | list[dict[str, Any]] | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    top_p: float | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET
    stream: bool | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    tools: list[dict[str, Any]] | UnsetType = UNSET
    tool_choice: dict[str, Any] | UnsetType = UNSET
    thinking: dict[str, Any] | UnsetType = UNSET


#: anthropic-native content blocks a client may send as they are, per message role
_NATIVE_USER = frozenset({"image", "document"})
_NATIVE_ASSISTANT = frozenset({"thinking", "redacted_thinking"})


def _text_block(part: dict[str, Any], param: str) -> dict[str, Any] | None:
    text = part.get("text")
    if not isinstance(text, str):
        raise InvalidRequest(f"{param}.text must be a string", param=f"{param}.text")
    if not text:
        return None  # the API rejects empty text blocks
    block: dict[str, Any] = {"type": "text", "text": text}
    cache = part.get("cache_control")
    if cache is not None:
        block["cache_control"] = cache
    return block


def _data_url(url: str, param: str) -> dict[str, Any]:
    """``data:<media type>;base64,<data>`` -> a base64 source."""
    head, sep, data = url[5:].partition(",")
    media_type, _, encoding = head.partition(";")
    if not sep or encoding != "base64" or not media_type:
        raise InvalidRequest(f"{param} must be a base64 data: URL (data:<media type>;base64,...)", param=param)
    return {"type": "base64", "media_type": media_type, "data": data}


def _image_block(part: dict[str, Any], param: str) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    param = f"{param}.image_url.url"
    if not isinstance(url, str):
        raise InvalidRequest(f"{param} must be a string", param=param)
    if url.startswith("data:"):
        source = _data_url(url, param)
    elif url.startswith(("https://", "http://")):
        source = {"type": "url", "url": url}
    else:
        raise InvalidRequest(f"{param} must be an http(s) URL or a base64 data: URL", param=param)
    block: dict[str, Any] = {"type": "image", "source": source}
    cache = part.get("cache_control")
    if cache is not None:
        block["cache_control"] = cache
    return block


def _file_block(part: dict[str, Any], param: str) -> dict[str, Any]:
    file = part.get("file")
    data = file.get("file_data") if isinstance(file, dict) else None
    if not isinstance(data, str) or not data.startswith("data:"):
        raise InvalidRequest(f"{param}.file.file_data must be a base64 data: URL (file ids are not supported by "
                             "anthropic)", param=f"{param}.file.file_data")
    return {"type": "document", "source": _data_url(data, f"{param}.file.file_data")}


def _blocks(content: str | list[dict[str, Any]] | None, param: str, native: frozenset[str]) -> list[dict[str, Any]]:
    """A message's content as anthropic content blocks (empty text left out)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        where = f"{param}[{j}]"
        kind = part.get("type")
        if kind == "text" or kind == "refusal":
            block = _text_block(part if kind == "text" else {"text": part.get("refusal")}, where)
            if block is not None:
                blocks.append(block)
        elif kind == "image_url" and native is _NATIVE_USER:
            blocks.append(_image_block(part, where))
        elif kind == "file" and native is _NATIVE_USER:
            blocks.append(_file_block(part, where))
        elif kind in native:
            blocks.append(part)
        else:
            raise InvalidRequest(f"{where}.type '{kind}' is not supported by anthropic in this message",
                                 param=f"{where}.type")
    return blocks


def _tool_use(message: Message, i: int) -> list[dict[str, Any]]:
    out = []
    for k, call in enumerate(message.tool_calls or ()):
        param = f"messages[{i}].tool_calls[{k}]"
        function = call.function
        if function is None or not function.name:
            raise InvalidRequest(f"{param}.function.name is required", param=f"{param}.function.name")
        if not call.id:
            raise InvalidRequest(f"{param}.id is required", param=f"{param}.id")
        arguments = function.arguments or "{}"
        try:
            value = _decode(arguments)
        except msgspec.DecodeError:
            raise InvalidRequest(f"{param}.function.arguments is not valid JSON",
                                 param=f"{param}.function.arguments") from None
        if not isinstance(value, dict):
            raise InvalidRequest(f"{param}.function.arguments must be a JSON object",
                                 param=f"{param}.function.arguments")
        out.append({"type": "tool_use", "id": call.id, "name": function.name, "input": value})
    return out


def _tool_result(message: Message, i: int) -> dict[str, Any]:
    if not message.tool_call_id:
        raise InvalidRequest(f"messages[{i}].tool_call_id is required for a tool message",
                             param=f"messages[{i}].tool_call_id")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    content = message.content
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif content:
        parts = _blocks(content, f"messages[{i}].content", _NATIVE_USER)
        if parts:
            block["content"] = parts
    return block


def _system_parts(message: Message, i: int, parts: list[dict[str, Any]]) -> None:
    content = message.content
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "text": content})
        return
    for j, part in enumerate(content or ()):
        where = f"messages[{i}].content[{j}]"
        if part.get("type") != "text":
            raise InvalidRequest(f"{where}.type must be 'text' in a {message.role} message", param=f"{where}.type")
        block = _text_block(part, where)
        if block is not None:
            parts.append(block)


def _system(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | UnsetType:
    if not parts:
        return UNSET
    if any("cache_control" in p for p in parts):
        return parts  # blocks keep their cache_control
    return "\n".join(p["text"] for p in parts)


def _compact(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1:
        block = blocks[0]
        if block["type"] == "text" and len(block) == 2:
            return block["text"]
    return blocks


def map_messages(messages: list[Message]) -> tuple[list[MessageParam], str | list[dict[str, Any]] | UnsetType]:
    """Turns and the top-level system prompt.

    system/developer messages (wherever they are) become ``system``; tool messages become user-role tool_result
    blocks; consecutive messages of one role are merged into one turn, as the API wants user and assistant to
    alternate.
    """
    system: list[dict[str, Any]] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for i, message in enumerate(messages):
        role = message.role
        if role == "user":
            blocks = _blocks(message.content, f"messages[{i}].content", _NATIVE_USER)
        elif role == "assistant":
            blocks = _blocks(message.content, f"messages[{i}].content", _NATIVE_ASSISTANT)
            if message.tool_calls:
                blocks.extend(_tool_use(message, i))
            if message.function_call is not None:
                raise InvalidRequest(f"messages[{i}].function_call is deprecated and not supported by anthropic; "
                                     "use tool_calls", param=f"messages[{i}].function_call")
        elif role == "tool":
            role = "user"
            blocks = [_tool_result(message, i)]
        elif role == "system" or role == "developer":
            _system_parts(message, i, system)
            continue
        else:
            raise InvalidRequest(f"messages[{i}].role '{role}' is not supported by anthropic; use tool messages",
                                 param=f"messages[{i}].role")
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    return [MessageParam(role, _compact(blocks)) for role, blocks in turns], _system(system)


def _tools(req: ChatRequest, output: OutputTool | None
           ) -> tuple[list[dict[str, Any]] | UnsetType, dict[str, Any] | UnsetType]:
    """``tools`` and ``tool_choice``: the client's, plus the output tool that carries ``response_format``."""
    tools: list[dict[str, Any]] = []
    for tool in req.tools or ():
        function = tool.function
        item: dict[str, Any] = {
            "name": function.name,
            "input_schema": function.parameters or {"type": "object", "properties": {}},
        }
        if function.description:
            item["description"] = function.description
        tools.append(item)
    if output is not None:
        tools.append({"name": output.name, "description": output.description, "input_schema": output.schema})
        if output.forced:
            return tools, {"type": "tool", "name": output.name, "disable_parallel_tool_use": True}
        mapped: dict[str, Any] | UnsetType = {"type": "any"}
    elif not tools:
        return UNSET, UNSET
    else:
        choice = req.tool_choice
        mapped = UNSET
        if choice == "auto":
            mapped = {"type": "auto"}
        elif choice == "required":
            mapped = {"type": "any"}
        elif choice == "none":
            mapped = {"type": "none"}
        elif isinstance(choice, dict):
            mapped = {"type": "tool", "name": choice["function"]["name"]}
    if req.parallel_tool_calls is False:
        if mapped is UNSET:
            mapped = {"type": "auto"}
        if mapped["type"] != "none":
            mapped["disable_parallel_tool_use"] = True
    return tools, mapped


def _thinking_on(thinking: dict[str, Any] | None) -> bool:
    return thinking is not None and bool(thinking) and thinking.get("type") != "disabled"


def _stop(stop: str | list[str] | None) -> list[str] | UnsetType:
    if stop is None:
        return UNSET
    if isinstance(stop, str):
        return [stop]
    return list(stop) if stop else UNSET


def chat_body(req: ChatRequest, stream: bool) -> bytes:
    """A chat completions request as Messages API JSON bytes."""
    CHAT_FIELDS.refuse(req)
    output = output_tool(req)
    if output is not None and _thinking_on(req.thinking):
        raise InvalidRequest("response_format cannot be combined with thinking on anthropic: structured output is a "
                             "forced tool call, which anthropic refuses while thinking is enabled",
                             param="response_format")
    messages, system = map_messages(req.messages)
    tools, tool_choice = _tools(req, output)
    max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    body = MessagesBody(
        model=req.model,
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        messages=messages,
        system=system,
        temperature=UNSET if req.temperature is None else req.temperature,
        top_p=UNSET if req.top_p is None else req.top_p,
        stop_sequences=_stop(req.stop),
        stream=True if stream else UNSET,
        metadata=UNSET if req.user is None else {"user_id": req.user},
        tools=tools,
        tool_choice=tool_choice,
        thinking=UNSET if req.thinking is None else req.thinking,
    )
    return _encode(body)


def completion_body(req: CompletionRequest, stream: bool) -> bytes:
    """A text completion request as one user message (a single string prompt only)."""
    prompt = req.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise InvalidRequest("anthropic takes a single string prompt", param="prompt")
        prompt = prompt[0]
    COMPLETION_FIELDS.refuse(req)
    if not prompt:
        raise InvalidRequest("prompt must not be empty", param="prompt")
    body = MessagesBody(
        model=req.model,
        max_tokens=DEFAULT_MAX_TOKENS if req.max_tokens is None else req.max_tokens,
        messages=[MessageParam("user", prompt)],
        temperature=UNSET if req.temperature is None else req.temperature,
        top_p=UNSET if req.top_p is None else req.top_p,
        stop_sequences=_stop(req.stop),
        stream=True if stream else UNSET,
        metadata=UNSET if req.user is None else {"user_id": req.user},
    )
    return _encode(body)
