"""Unified chat <-> cloudA Converse: the request body, the answer, stop reasons, usage and AWS error bodies.

Facts relied on (AWS's public Bedrock Runtime API reference for Converse / ConverseStream):

- request body: ``messages`` (``role`` ``user`` | ``assistant``, ``content`` blocks), ``system`` (``[{text}]``),
  ``inferenceConfig`` (``maxTokens``, ``temperature``, ``topP``, ``stopSequences`` up to 4),
  ``toolConfig`` (``tools: [{toolSpec: {name, description, inputSchema: {json}}}]``, ``toolChoice`` one of
  ``{auto: {}}``, ``{any: {}}``, ``{tool: {name}}``; required whenever the messages hold toolUse / toolResult
  blocks), ``additionalModelRequestFields`` (model-specific parameters); the model id is in the path, not the body;
- content blocks: ``{text}``, ``{image: {format: png|jpeg|gif|webp, source: {bytes: <base64>}}}`` (user only),
  ``{toolUse: {toolUseId, name, input}}``, ``{toolResult: {toolUseId, content: [{text} | {json}], status}}``,
  ``{reasoningContent: {reasoningText: {text, signature}}}``;
- response: ``output.message.content`` blocks, ``stopReason`` (``end_turn``, ``tool_use``, ``max_tokens``,
  ``stop_sequence``, ``guardrail_intervened``, ``content_filtered``), ``usage`` (``inputTokens``, ``outputTokens``,
  ``totalTokens``, optional ``cacheReadInputTokens`` / ``cacheWriteInputTokens``), ``metrics.latencyMs``;
- errors: the type in the ``x-amzn-ErrorType`` header (``Type:<namespace URL>``) or the body's ``__type``
  (``namespace#Type``), the text in ``message`` (some services: ``Message``); modelled statuses:
  ValidationException 400, AccessDeniedException 403, ResourceNotFoundException 404, ModelTimeoutException 408,
  ModelErrorException 424, ModelStreamErrorException 424, ThrottlingException 429, ModelNotReadyException 429,
  ServiceQuotaExceededException 400, InternalServerException 500, ServiceUnavailableException 503; the signing
  layer answers 403 (UnrecognizedClientException, InvalidSignatureException, MissingAuthenticationTokenException).

Choices made here: ``system`` and ``developer`` messages become ``system`` blocks; ``tool`` messages become user
``toolResult`` blocks; consecutive messages with the same Converse role are merged; ``tool_choice: "required"`` is
``any``; ``"none"`` sends no toolConfig unless the history holds tool blocks (then the tools go without a choice).
A turn whose history holds tool calls but which sends no ``tools`` (a plain follow-up after a tool round, as several
client libraries send it) gets a ``toolConfig`` rebuilt from the history: one ``toolSpec`` per tool name the
history calls, with the permissive schema ``{"type": "object", "additionalProperties": true}`` and no
``toolChoice`` (the model may call those tools again; their calls come back as ``tool_calls``). What happens to each
unified field is the data of ``CHAT_FIELDS``: ``n > 1`` (Converse answers one choice) and ``logprobs`` are 400s
naming the field; the fields Converse has no place for are dropped and named in ``x-gateway-dropped-params``.
``response_format`` becomes a forced output tool (a ``toolSpec`` whose
``inputSchema.json`` is the schema, ``toolChoice {tool: {name}}``, or ``{any: {}}`` beside client tools) whose input
comes back as ``message.content`` (``structured_output``; ``toolChoice`` ``any`` / ``tool`` is honoured by the
models that support it, e.g. anthropic's and mistral's large models). Images must be ``data:`` URLs; ``seed``,
penalties, ``logit_bias``, ``user`` and ``parallel_tool_calls`` have no Converse field and are not sent. ``thinking``
goes to ``additionalModelRequestFields.thinking`` and reasoning text comes back as ``reasoning_content`` only when
``strict_vendorA_compliance`` is false (else ``thinking`` is dropped). ``prompt_tokens`` is ``inputTokens``;
``cacheReadInputTokens`` is reported as ``prompt_tokens_details.cached_tokens``. Answers carry
``"system_fingerprint": null`` (Converse has none). An error body that is not AWS-shaped (no ``message`` /
``Message``: a proxy or load balancer in front) keeps what the upstream said: its vendorA-style ``error.message`` /
``message``, else the start of the body.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import msgspec

from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import malformed, snippet, upstream_error
from gateway.providers.fields import FieldTable, above_one, is_true, present
from gateway.providers.structured_output import PERMISSIVE_OBJECT, OutputTool, output_tool
from gateway.schema.chat import ChatRequest
from gateway.schema.common import Usage

_encode = msgspec.json.encode
_decode = msgspec.json.decode

FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}

ERROR_STATUSES = {
    "ValidationException": 400,
    "ServiceQuotaExceededException": 400,
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "InvalidSignatureException": 403,
    "MissingAuthenticationTokenException": 403,
    "IncompleteSignatureException": 403,
    "ExpiredTokenException": 403,
    "ResourceNotFoundException": 404,
    "ModelTimeoutException": 408,
    "ModelErrorException": 424,
    "ModelStreamErrorException": 424,
    "ThrottlingException": 429,
    "ModelNotReadyException": 429,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}

_DATA_URL = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp);base64,(.+)$", re.S | re.I)

#: the chat fields Converse takes (as they are or translated) and refuses; any other field is dropped
CHAT_FIELDS = FieldTable(
    taken=frozenset({"messages", "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
                     "stream", "stream_options", "tools", "functions", "tool_choice", "function_call",
                     "response_format"}),
    refused={
        "n": (above_one, "n > 1 is not supported by cloudA (Converse answers one choice)"),
        "logprobs": (is_true, "logprobs is not supported by cloudA (Converse answers carry no log probabilities)"),
        "top_logprobs": (present, "top_logprobs is not supported by cloudA (Converse answers carry no log "
                                  "probabilities)"),
    },
    loose_only=frozenset({"thinking"}),
)


def new_id() -> str:
    return "chatcmpl-" + os.urandom(12).hex()


def error_type_name(name: str) -> str:
    """``throttlingException`` (a stream member name) -> ``ThrottlingException``; strips ``:url`` / ``ns#``."""
    name = name.split(":", 1)[0].rsplit("#", 1)[-1].strip()
    return name[:1].upper() + name[1:]


# --- request --------------------------------------------------------------------------------------------------

def _text_parts(content: str | list[dict[str, Any]] | None, where: str) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type")
        if kind == "text" or (kind is None and "text" in part):
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidRequest(f"{where}.content[{j}].text must be a string", param=f"{where}.content[{j}].text")
            texts.append(text)
        else:
            raise InvalidRequest(
                f"{where}.content[{j}] of type {kind!r} is not supported here by cloudA", param=f"{where}.content[{j}]"
            )
    return texts


def _image_block(part: dict[str, Any], where: str) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise InvalidRequest(f"{where}.image_url.url is required", param=f"{where}.image_url.url")
    match = _DATA_URL.match(url)
    if match is None:
        raise InvalidRequest(
            f"{where}.image_url.url must be a data:image/(png|jpeg|gif|webp);base64 URL for cloudA",
            param=f"{where}.image_url.url",
        )
    fmt = match.group(1).lower()
    return {"image": {"format": "jpeg" if fmt == "jpg" else fmt, "source": {"bytes": match.group(2).strip()}}}


def _user_blocks(content: str | list[dict[str, Any]] | None, where: str) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    blocks = []
    for j, part in enumerate(content):
        kind = part.get("type")
        if kind == "text" or (kind is None and "text" in part):
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidRequest(f"{where}.content[{j}].text must be a string", param=f"{where}.content[{j}].text")
            if text:
                blocks.append({"text": text})
        elif kind == "image_url":
            blocks.append(_image_block(part, f"{where}.content[{j}]"))
        else:
            raise InvalidRequest(
                f"{where}.content[{j}] of type {kind!r} is not supported by cloudA", param=f"{where}.content[{j}]"
            )
    return blocks


def _tool_input(arguments: str | None, where: str) -> Any:
    if not arguments:
        return {}
    try:
        return _decode(arguments)
    except msgspec.DecodeError:
        raise InvalidRequest(f"{where} is not valid JSON", param=where) from None


def _messages(request: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[str], bool]:
    """(Converse messages, system blocks, the tool names the history calls, whether any tool block is present)."""
    system: list[dict[str, str]] = []
    out: list[dict[str, Any]] = []
    called: dict[str, None] = {}
    has_tools = False
    for i, message in enumerate(request.messages):
        where = f"messages[{i}]"
        role = message.role
        if role in ("system", "developer"):
            system.extend({"text": t} for t in _text_parts(message.content, where) if t)
            continue
        if role == "user":
            converse_role, blocks = "user", _user_blocks(message.content, where)
        elif role == "assistant":
            converse_role = "assistant"
            blocks = [{"text": t} for t in _text_parts(message.content, where) if t]
            calls = [(c.id, c.function) for c in message.tool_calls or ()]
            if message.function_call is not None and message.function_call.name:
                calls.append((message.function_call.name, message.function_call))
            for j, (call_id, fn) in enumerate(calls):
                if fn is None or not fn.name:
                    raise InvalidRequest(
                        f"{where}.tool_calls[{j}].function.name is required", param=f"{where}.tool_calls[{j}].function"
                    )
                blocks.append({"toolUse": {
                    "toolUseId": call_id or fn.name,
                    "name": fn.name,
                    "input": _tool_input(fn.arguments, f"{where}.tool_calls[{j}].function.arguments"),
                }})
                called[fn.name] = None
                has_tools = True
        else:  # tool / function results
            tool_id = message.tool_call_id if role == "tool" else message.name
            if not tool_id:
                field = "tool_call_id" if role == "tool" else "name"
                raise InvalidRequest(f"{where}.{field} is required for a {role} message", param=f"{where}.{field}")
            texts = _text_parts(message.content, where)
            converse_role = "user"
            blocks = [{"toolResult": {"toolUseId": tool_id, "content": [{"text": "".join(texts)}]}}]
            has_tools = True
        if out and out[-1]["role"] == converse_role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": converse_role, "content": blocks})
    return out, system, list(called), has_tools


def _tool_config(request: ChatRequest, called: list[str], has_tool_blocks: bool,
                 output: OutputTool | None) -> dict[str, Any] | None:
    """``toolConfig``: the client's tools (else those the history calls, with a permissive schema, since Converse
    wants a toolConfig beside tool blocks), plus the output tool that carries ``response_format``."""
    specs: list[dict[str, Any]] = []
    definitions = [t.function for t in request.tools] if request.tools else list(request.functions or ())
    for fn in definitions:
        spec: dict[str, Any] = {"name": fn.name,
                                "inputSchema": {"json": fn.parameters or {"type": "object", "properties": {}}}}
        if fn.description:
            spec["description"] = fn.description
        specs.append({"toolSpec": spec})
    if not specs:
        specs = [{"toolSpec": {"name": name, "inputSchema": {"json": PERMISSIVE_OBJECT}}} for name in called]
    if output is not None:
        specs.append({"toolSpec": {"name": output.name, "description": output.description,
                                   "inputSchema": {"json": output.schema}}})
        forced = {"tool": {"name": output.name}} if output.forced else {"any": {}}
        return {"tools": specs, "toolChoice": forced}
    if not specs:
        return None
    if not definitions:
        return {"tools": specs}  # tools rebuilt from the history: there only for the history's sake
    choice = request.tool_choice if request.tool_choice is not None else request.function_call
    config: dict[str, Any] = {"tools": specs}
    if choice == "none":
        return config if has_tool_blocks else None
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif isinstance(choice, dict):
        name = choice["function"]["name"] if "function" in choice else choice.get("name")
        config["toolChoice"] = {"tool": {"name": name}}
    return config


def build_body(request: ChatRequest, reasoning: bool) -> bytes:
    """The Converse / ConverseStream JSON body for a unified chat request."""
    CHAT_FIELDS.refuse(request)
    output = output_tool(request)
    messages, system, called, has_tool_blocks = _messages(request)
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    inference: dict[str, Any] = {}
    max_tokens = request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens
    if max_tokens is not None:
        inference["maxTokens"] = max_tokens
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if request.top_p is not None:
        inference["topP"] = request.top_p
    if request.stop is not None:
        inference["stopSequences"] = [request.stop] if isinstance(request.stop, str) else list(request.stop)
    if inference:
        body["inferenceConfig"] = inference
    tools = _tool_config(request, called, has_tool_blocks, output)
    if tools is not None:
        body["toolConfig"] = tools
    if reasoning and request.thinking:
        body["additionalModelRequestFields"] = {"thinking": request.thinking}
    return _encode(body)


# --- response -------------------------------------------------------------------------------------------------

class _ToolUse(msgspec.Struct):
    toolUseId: str = ""
    name: str = ""
    input: Any = None


class _ReasoningText(msgspec.Struct):
    text: str = ""
    signature: str | None = None


class _Reasoning(msgspec.Struct):
    reasoningText: _ReasoningText | None = None
    redactedContent: str | None = None


class _Block(msgspec.Struct):
    text: str | None = None
    toolUse: _ToolUse | None = None
    reasoningContent: _Reasoning | None = None


class _Message(msgspec.Struct):
    role: str = "assistant"
    content: list[_Block] = msgspec.field(default_factory=list)


class _Output(msgspec.Struct):
    message: _Message | None = None


class TokenUsage(msgspec.Struct, gc=False):
    inputTokens: int = 0
    outputTokens: int = 0
    totalTokens: int | None = None
    cacheReadInputTokens: int | None = None
    cacheWriteInputTokens: int | None = None


class _Response(msgspec.Struct):
    output: _Output | None = None
    stopReason: str | None = None
    usage: TokenUsage | None = None


_response = msgspec.json.Decoder(_Response)


class _Function(msgspec.Struct):
    name: str
    arguments: str


class _ToolCall(msgspec.Struct):
    id: str
    function: _Function
    type: str = "function"


class _OutMessage(msgspec.Struct):
    content: str | None
    role: str = "assistant"
    refusal: None = None
    tool_calls: list[_ToolCall] | msgspec.UnsetType = msgspec.UNSET
    reasoning_content: str | msgspec.UnsetType = msgspec.UNSET


class _Choice(msgspec.Struct):
    message: _OutMessage
    finish_reason: str | None
    index: int = 0
    logprobs: None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int


class OutUsage(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: _PromptDetails | msgspec.UnsetType = msgspec.UNSET


class _Completion(msgspec.Struct):
    id: str
    created: int
    model: str
    choices: list[_Choice]
    usage: OutUsage | None
    object: str = "chat.completion"
    system_fingerprint: None = None


def usage_of(tokens: TokenUsage) -> tuple[OutUsage, Usage]:
    """(the unified response's usage object, the gateway's Usage record)."""
    total = tokens.totalTokens if tokens.totalTokens is not None else tokens.inputTokens + tokens.outputTokens
    out = OutUsage(tokens.inputTokens, tokens.outputTokens, total)
    if tokens.cacheReadInputTokens is not None:
        out.prompt_tokens_details = _PromptDetails(tokens.cacheReadInputTokens)
    return out, Usage(tokens.inputTokens, tokens.outputTokens, total)


def finish_reason(stop_reason: str | None) -> str | None:
    if stop_reason is None:
        return None
    return FINISH_REASONS.get(stop_reason, "stop")


def parse_response(provider: str, body: bytes, model: str, reasoning: bool, output_tool: str | None = None
                   ) -> tuple[bytes, Usage | None]:
    """A Converse answer as unified ``chat.completion`` JSON bytes, plus usage.

    ``output_tool`` names the tool that carries ``response_format``: its input is the ``content`` (JSON text) and
    text blocks are left out.
    """
    try:
        doc = _response.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise malformed(provider, "not a Converse JSON answer", body) from None
    if doc.output is None or doc.output.message is None:
        raise malformed(provider, "no output.message in the answer", body)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[_ToolCall] = []
    outputs: list[str] = []
    for block in doc.output.message.content:
        if block.text is not None:
            if output_tool is None:
                texts.append(block.text)
        elif block.toolUse is not None:
            tool = block.toolUse
            arguments = _encode(tool.input if tool.input is not None else {}).decode()
            if output_tool is not None and tool.name == output_tool:
                outputs.append(arguments)
            else:
                calls.append(_ToolCall(tool.toolUseId, _Function(tool.name, arguments)))
        elif block.reasoningContent is not None and block.reasoningContent.reasoningText is not None:
            thoughts.append(block.reasoningContent.reasoningText.text)
    content = outputs[0] if outputs else "".join(texts) if texts or not calls else None
    message = _OutMessage(content)
    if calls:
        message.tool_calls = calls
    if reasoning and thoughts:
        message.reasoning_content = "".join(thoughts)
    out_usage, usage = usage_of(doc.usage) if doc.usage is not None else (None, None)
    reason = finish_reason(doc.stopReason)
    if reason == "tool_calls" and outputs and not calls:
        reason = "stop"  # only the output tool was called: the answer is complete
    completion = _Completion(new_id(), int(time.time()), model, [_Choice(message, reason)], out_usage)
    return _encode(completion), usage


# --- errors ---------------------------------------------------------------------------------------------------

class _AwsError(msgspec.Struct):
    message: str | None = None
    Message: str | None = None
    type_: str | None = msgspec.field(default=None, name="__type")


_aws_error = msgspec.json.Decoder(_AwsError)


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    value = headers.get(name)
    if value is None and isinstance(headers, dict):
        lowered = name.lower()
        for key, item in headers.items():
            if key.lower() == lowered:
                return item
    return value


def aws_error(provider: str, status: int, headers: Any, body: bytes) -> GatewayError:
    """An AWS error answer (status, ``x-amzn-ErrorType`` / ``__type``, ``message``) as the relayed GatewayError."""
    try:
        doc = _aws_error.decode(body) if body else _AwsError()
    except (msgspec.DecodeError, msgspec.ValidationError):
        doc = None
    raw_type = _header(headers, "x-amzn-ErrorType") or (doc.type_ if doc is not None else None)
    error_type = error_type_name(raw_type) if raw_type else None
    message = (doc.message or doc.Message) if doc is not None else None
    if error_type in ERROR_STATUSES:
        status = ERROR_STATUSES[error_type]
    if message is None and body:
        # not AWS-shaped (a proxy, a load balancer, a gateway in front): keep what the upstream said
        return upstream_error(provider, status, body, headers, type_=error_type)
    if message is None:
        message = f"{provider} returned HTTP {status}" + (f" ({error_type})" if error_type else "")
    return upstream_error(provider, status, body, headers, message=message, type_=error_type)


def exception_error(provider: str, exception_type: str, payload: bytes) -> GatewayError:
    """An in-stream exception message (``:message-type: exception``) as the mapped GatewayError."""
    error_type = error_type_name(exception_type)
    try:
        doc = _aws_error.decode(payload) if payload else _AwsError()
    except (msgspec.DecodeError, msgspec.ValidationError):
        doc = _AwsError(message=snippet(payload))
    message = doc.message or doc.Message or f"{provider} stream failed with {error_type}"
    return upstream_error(provider, ERROR_STATUSES.get(error_type, 500), b"", message=message, type_=error_type)
