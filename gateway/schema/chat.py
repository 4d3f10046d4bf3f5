"""The chat completions request body (POST /v1/chat/completions) with the spec's field rules."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.schema.common import (
    BodyDecoder,
    ChoiceCount,
    LogitBias,
    Penalty,
    Seed,
    Stop,
    StreamOptions,
    Temperature,
    TopP,
)

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class FunctionCall(msgspec.Struct, frozen=True):
    name: str | None = None
    arguments: str | None = None


class ToolCall(msgspec.Struct, frozen=True):
    id: str | None = None
    type: str = "function"
    function: FunctionCall | None = None


class Message(msgspec.Struct, frozen=True):
    role: Role
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    function_call: FunctionCall | None = None
    reasoning_content: str | None = None


class FunctionDefinition(msgspec.Struct, frozen=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(msgspec.Struct, frozen=True):
    type: Literal["function"]
    function: FunctionDefinition


class ChatRequest(msgspec.Struct, frozen=True):
    """Known fields are typed and range-checked; unknown fields are ignored here and forwarded untouched."""

    messages: Annotated[list[Message], msgspec.Meta(min_length=1)]
    model: str
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    logit_bias: LogitBias | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, msgspec.Meta(ge=0, le=20)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_completion_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    n: ChoiceCount | None = None
    response_format: dict[str, Any] | None = None
    seed: Seed | None = None
    stop: Stop | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    thinking: dict[str, Any] | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    tools: Annotated[list[Tool], msgspec.Meta(max_length=128)] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    function_call: str | dict[str, Any] | None = None
    functions: Annotated[list[FunctionDefinition], msgspec.Meta(min_length=1, max_length=128)] | None = None


_decoder = BodyDecoder(ChatRequest)
_TOOL_CHOICES = ("none", "auto", "required")


def parse_chat(body: bytes) -> ChatRequest:
    """Decode and validate a chat body; any violation is a 400 naming the field."""
    req = _decoder.decode(body)
    if req.top_logprobs is not None and not req.logprobs:
        raise InvalidRequest("top_logprobs requires logprobs to be true", param="top_logprobs")
    if req.stream_options is not None and not req.stream:
        raise InvalidRequest("stream_options is only allowed when stream is true", param="stream_options")
    choice = req.tool_choice
    if choice is not None:
        if isinstance(choice, str):
            if choice not in _TOOL_CHOICES:
                raise InvalidRequest(
                    "tool_choice must be 'none', 'auto', 'required' or a function object", param="tool_choice"
                )
        elif choice.get("type") != "function" or not isinstance(choice.get("function"), dict) or not isinstance(
            choice["function"].get("name"), str
        ):
            raise InvalidRequest(
                "tool_choice object must be {type: 'function', function: {name}}", param="tool_choice"
            )
    fc = req.function_call
    if fc is not None:
        if isinstance(fc, str):
            if fc not in ("none", "auto"):
                raise InvalidRequest("function_call must be 'none', 'auto' or {name}", param="function_call")
        elif not isinstance(fc.get("name"), str):
            raise InvalidRequest("function_call object must have a string name", param="function_call")
    return req
