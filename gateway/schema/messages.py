"""The shape of a Messages API request (``POST /v1/messages`` and ``/count_tokens``) that every one is checked
against before it goes anywhere, forwarded to a provider that serves the dialect or translated to unified chat.

Only what anthropic's API reference makes required or typed is checked here (each message an object with a role
and a string or a list of typed blocks, each tool an object with a name, the tool choice's type, the numbers and
strings of the settings); fields the shape does not name pass as sent, for the provider to judge. What a
translation cannot express (a server tool, a block type chat has no place for) is the translation's 400
(gateway/pipeline/dialects/messages.py).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class Block(msgspec.Struct, frozen=True, gc=False):
    """A content block: its ``type`` (what else it holds depends on the type)."""

    type: str


class TextBlock(msgspec.Struct, frozen=True, gc=False):
    type: Literal["text"]
    text: str


class Message(msgspec.Struct, frozen=True, gc=False):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class Tool(msgspec.Struct, frozen=True, gc=False):
    """A client tool (``input_schema``) or a server tool (a versioned ``type``); both have a name."""

    name: str
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class ToolChoice(msgspec.Struct, frozen=True, gc=False):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class Metadata(msgspec.Struct, frozen=True, gc=False):
    user_id: str | None = None


class MessagesRequest(msgspec.Struct, frozen=True, gc=False):
    """A Messages request as far as it is checked (``max_tokens`` is required on ``/v1/messages`` only)."""

    model: str
    messages: list[Message]
    max_tokens: int | None = None
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool | None = None
    metadata: Metadata | None = None
