"""The chat completions request body (POST /v1/chat/completions) with the spec's field rules."""

from __future__ import annotations

import re
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
    check_metadata,
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
    metadata: dict[str, Any] | None = None  # vendorA's stored-completion tags: the spec's metadata limits


_decoder = BodyDecoder(ChatRequest)
_TOOL_CHOICES = ("none", "auto", "required")
RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema")
#: ``response_format.json_schema.name`` as vendorA's API takes it
_SCHEMA_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def check_response_format(fmt: dict[str, Any]) -> None:
    """The one check of ``response_format``, the same for every provider (vendorA's rules): ``type`` is ``text``,
    ``json_object`` or ``json_schema``; ``json_schema`` needs ``json_schema`` with a ``name`` (letters, digits, ``_``
    and ``-``, at most 64) and a ``schema`` object; ``description`` is a string and ``strict`` a boolean when sent.
    Other members pass through untouched. A violation is a 400 naming the field."""
    kind = fmt.get("type")
    if kind not in RESPONSE_FORMAT_TYPES:
        got = "missing" if kind is None else repr(kind) if isinstance(kind, str) else f"a {type(kind).__name__}"
        raise InvalidRequest(f"response_format.type must be 'text', 'json_object' or 'json_schema' (got {got})",
                             param="response_format.type")
    if kind != "json_schema":
        return
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict):
        raise InvalidRequest("response_format.json_schema is required for type 'json_schema': an object with name "
                             "and schema", param="response_format.json_schema")
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        raise InvalidRequest("response_format.json_schema.name is required: 1 to 64 letters, digits, '_' or '-'",
                             param="response_format.json_schema.name")
    if not isinstance(spec.get("schema"), dict):
        raise InvalidRequest("response_format.json_schema.schema is required: a JSON Schema object",
                             param="response_format.json_schema.schema")
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidRequest("response_format.json_schema.description must be a string",
                             param="response_format.json_schema.description")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidRequest("response_format.json_schema.strict must be a boolean",
                             param="response_format.json_schema.strict")


def parse_chat(body: bytes) -> ChatRequest:
    """Decode and validate a chat body; any violation is a 400 naming the field."""
    req = _decoder.decode(body)
    if req.metadata is not None:
        check_metadata(req.metadata)
    if req.response_format is not None:
        check_response_format(req.response_format)
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
