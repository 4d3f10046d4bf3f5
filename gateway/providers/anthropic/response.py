"""Anthropic Messages answers and errors -> unified chat / text-completion JSON and GatewayErrors."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from gateway.http.errors import GatewayError
from gateway.providers.base import malformed, upstream_error
from gateway.schema.common import Usage

PROVIDER = "anthropic"

#: anthropic stop_reason -> vendorA finish_reason
FINISH_REASONS: dict[str | None, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

#: anthropic error type -> HTTP status (for in-band stream errors, which carry no status of their own)
ERROR_STATUS: dict[str | None, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


# --- the anthropic side -------------------------------------------------------------------------------------

class Block(msgspec.Struct, gc=False):
    """One content block of an answer (text, tool_use, thinking, redacted_thinking, ...)."""

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: msgspec.Raw = msgspec.Raw(b"")
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class AUsage(msgspec.Struct, gc=False):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class AError(msgspec.Struct, gc=False):
    type: str | None = None
    message: str | None = None


class AMessage(msgspec.Struct, gc=False):
    type: str | None = None
    id: str | None = None
    model: str | None = None
    content: list[Block] | None = None
    stop_reason: str | None = None
    usage: AUsage | None = None
    error: AError | None = None


class ErrorEnvelope(msgspec.Struct, gc=False):
    type: str | None = None
    error: AError | str | None = None
    message: str | None = None


_message = msgspec.json.Decoder(AMessage)
_error = msgspec.json.Decoder(ErrorEnvelope)


# --- the unified side ---------------------------------------------------------------------------------------

class FunctionOut(msgspec.Struct, gc=False):
    name: str
    arguments: str


class ToolCallOut(msgspec.Struct, gc=False):
    id: str
    function: FunctionOut
    type: str = "function"


class PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: int


class UsageOut(msgspec.Struct, gc=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptDetails


class MessageOut(msgspec.Struct, omit_defaults=True, gc=False):
    role: str
    content: str | None
    tool_calls: list[ToolCallOut] | UnsetType = UNSET
    content_blocks: list[dict[str, Any]] | UnsetType = UNSET


class ChoiceOut(msgspec.Struct, gc=False):
    index: int
    message: MessageOut
    logprobs: None
    finish_reason: str | None


class ChatCompletion(msgspec.Struct, gc=False):
    id: str
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut
    object: str = "chat.completion"
    system_fingerprint: None = None


class TextChoice(msgspec.Struct, gc=False):
    index: int
    text: str
    logprobs: None
    finish_reason: str | None


class TextCompletion(msgspec.Struct, gc=False):
    id: str
    created: int
    model: str
    choices: list[TextChoice]
    usage: UsageOut
    object: str = "text_completion"
    system_fingerprint: None = None


_encode = msgspec.json.encode


class Tokens:
    """Token counts as anthropic reports them (input split into uncached, cache-written and cache-read)."""

    __slots__ = ("input", "cache_creation", "cache_read", "output")

    def __init__(self) -> None:
        self.input = 0
        self.cache_creation = 0
        self.cache_read = 0
        self.output = 0

    def update(self, usage: AUsage | None) -> None:
        """Take every count the event carries (message_delta counts are cumulative)."""
        if usage is None:
            return
        if usage.input_tokens is not None:
            self.input = usage.input_tokens
        if usage.cache_creation_input_tokens is not None:
            self.cache_creation = usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens is not None:
            self.cache_read = usage.cache_read_input_tokens
        if usage.output_tokens is not None:
            self.output = usage.output_tokens

    @property
    def prompt(self) -> int:
        return self.input + self.cache_creation + self.cache_read

    def unified(self) -> Usage:
        prompt = self.prompt
        return Usage(prompt_tokens=prompt, completion_tokens=self.output, total_tokens=prompt + self.output)

    def out(self) -> UsageOut:
        prompt = self.prompt
        return UsageOut(prompt, self.output, prompt + self.output, PromptDetails(self.cache_read))


def finish_reason(stop_reason: str | None) -> str:
    return FINISH_REASONS.get(stop_reason, "stop")


def decode_message(body: bytes) -> AMessage:
    """A 2xx body as a Message; an error envelope raises that error, anything else is a 502."""
    try:
        message = _message.decode(body)
    except msgspec.DecodeError:
        raise malformed(PROVIDER, "not a JSON object", body) from None
    except msgspec.ValidationError:
        raise malformed(PROVIDER, "not a message object", body) from None
    if message.type == "error":
        error = message.error or AError()
        raise upstream_error(PROVIDER, ERROR_STATUS.get(error.type, 502), body, message=error.message or
                             "anthropic returned an error", type_=error.type)
    if message.type != "message" or message.content is None:
        raise malformed(PROVIDER, "not a message object", body)
    return message


def _arguments(block: Block) -> str:
    raw = bytes(block.input)
    return raw.decode() if raw else "{}"


def chat_completion(message: AMessage, model: str | None, strict: bool, output_tool: str | None = None
                    ) -> tuple[bytes, Usage]:
    """The unified chat completion JSON for a Message (thinking blocks only when ``strict`` is false).

    ``output_tool`` names the tool that carries ``response_format``: its input is the answer's ``content`` (JSON
    text), and text blocks are left out (see ``structured_output``).
    """
    texts: list[str] = []
    tool_calls: list[ToolCallOut] = []
    blocks: list[dict[str, Any]] = []
    outputs: list[str] = []
    for block in message.content or ():
        kind = block.type
        if kind == "text":
            if output_tool is not None:
                continue
            texts.append(block.text or "")
            if not strict:
                blocks.append({"type": "text", "text": block.text or ""})
        elif kind == "tool_use":
            if output_tool is not None and block.name == output_tool:
                outputs.append(_arguments(block))
                continue
            tool_calls.append(ToolCallOut(block.id or "", FunctionOut(block.name or "", _arguments(block))))
        elif kind == "thinking":
            if not strict:
                blocks.append({"type": "thinking", "thinking": block.thinking or "", "signature": block.signature})
        elif kind == "redacted_thinking":
            if not strict:
                blocks.append({"type": "redacted_thinking", "data": block.data})
    if outputs:
        content: str | None = outputs[0]
    else:
        content = "".join(texts) if texts else (None if tool_calls else "")
    out = MessageOut("assistant", content, tool_calls=tool_calls or UNSET, content_blocks=UNSET if strict else blocks)
    tokens = Tokens()
    tokens.update(message.usage)
    reason = finish_reason(message.stop_reason)
    if reason == "tool_calls" and outputs and not tool_calls:
        reason = "stop"  # only the output tool was called: the answer is complete
    body = ChatCompletion(
        id=message.id or "",
        created=int(time.time()),
        model=message.model or model or "",
        choices=[ChoiceOut(0, out, None, reason)],
        usage=tokens.out(),
    )
    return _encode(body), tokens.unified()


def text_completion(message: AMessage, model: str | None) -> tuple[bytes, Usage]:
    """The unified text completion JSON for a Message (text blocks joined)."""
    text = "".join(b.text or "" for b in message.content or () if b.type == "text")
    tokens = Tokens()
    tokens.update(message.usage)
    body = TextCompletion(
        id=message.id or "",
        created=int(time.time()),
        model=message.model or model or "",
        choices=[TextChoice(0, text, None, finish_reason(message.stop_reason))],
        usage=tokens.out(),
    )
    return _encode(body), tokens.unified()


def error_from(status: int, body: bytes, headers: Any = None) -> GatewayError:
    """An anthropic error answer (``{"type": "error", "error": {type, message}}``) with its status unchanged."""
    try:
        envelope = _error.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        envelope = None
    if envelope is not None:
        error = envelope.error
        if isinstance(error, AError) and error.message:
            return upstream_error(PROVIDER, status, body, headers, message=error.message, type_=error.type)
        if isinstance(error, str) and error:
            return upstream_error(PROVIDER, status, body, headers, message=error)
        if envelope.message:
            return upstream_error(PROVIDER, status, body, headers, message=envelope.message)
    return upstream_error(PROVIDER, status, body, headers)


def stream_error(data: bytes) -> GatewayError:
    """An in-band ``error`` event: the status its type stands for (529 for overloaded_error)."""
    try:
        envelope = _error.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return malformed(PROVIDER, "error event is not JSON", data)
    error = envelope.error if isinstance(envelope.error, AError) else AError(message=envelope.message)
    status = ERROR_STATUS.get(error.type, 500)
    return upstream_error(PROVIDER, status, data, message=error.message or "anthropic stream error",
                          type_=error.type)
