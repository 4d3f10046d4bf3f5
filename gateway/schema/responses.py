"""The shape of a Responses API request (``POST /v1/responses``) that every one is checked against before it goes
anywhere, forwarded to a provider that serves the dialect or translated to unified chat.

Only what vendorA's API reference makes required or typed is checked (``input`` a string or a list of item
objects, a message item's role and content, each tool an object with a type and a function tool's name, the
settings' types); fields the shape does not name pass as sent, for the provider to judge. What a translation cannot
express (a built-in tool, an item type chat has no place for) is the translation's 400
(gateway/pipeline/dialects/responses.py).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class Part(msgspec.Struct, frozen=True, gc=False):
    """A content part: its ``type`` (``input_text``, ``input_image``, ``output_text``...)."""

    type: str


class InputItem(msgspec.Struct, frozen=True, gc=False):
    """An input item: a message (the default type: ``role`` and ``content``) or another item kind."""

    type: str = "message"
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[Part] | None = None


class Tool(msgspec.Struct, frozen=True, gc=False):
    type: str
    name: str | None = None


class ToolChoice(msgspec.Struct, frozen=True, gc=False):
    type: str
    name: str | None = None


class Format(msgspec.Struct, frozen=True, gc=False):
    type: str
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class Text(msgspec.Struct, frozen=True, gc=False):
    format: Format | None = None


class ResponsesRequest(msgspec.Struct, frozen=True, gc=False):
    """A Responses request as far as it is checked."""

    model: str
    input: str | list[InputItem]
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: str | ToolChoice | None = None
    text: Text | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    parallel_tool_calls: bool | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    stream: bool | None = None
    user: str | None = None

