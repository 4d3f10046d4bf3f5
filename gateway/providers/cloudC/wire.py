"""msgspec Structs of the generateContent wire format: the request (camelCase, unset fields left out) and the answer.

Field names follow the Vertex AI reference for GenerateContentRequest, Content, Part, Tool, ToolConfig,
GenerationConfig and GenerateContentResponse (Candidate, UsageMetadata, PromptFeedback).
"""

from __future__ import annotations

from typing import Any

import msgspec


class _Wire(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    pass


class InlineData(_Wire):
    mime_type: str
    data: str


class FileData(_Wire):
    mime_type: str
    file_uri: str


class FunctionCall(_Wire):
    name: str
    args: dict[str, Any] | None = None


class FunctionResponse(_Wire):
    name: str
    response: dict[str, Any]


class Part(_Wire):
    text: str | None = None
    inline_data: InlineData | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    thought_signature: str | None = None


class Content(_Wire):
    parts: list[Part]
    role: str | None = None


class FunctionDeclaration(_Wire):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(_Wire):
    function_declarations: list[FunctionDeclaration]


class FunctionCallingConfig(_Wire):
    mode: str
    allowed_function_names: list[str] | None = None


class ToolConfig(_Wire):
    function_calling_config: FunctionCallingConfig


class ThinkingConfig(_Wire):
    include_thoughts: bool | None = None
    thinking_budget: int | None = None


class GenerationConfig(_Wire):
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    stop_sequences: list[str] | None = None
    candidate_count: int | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    thinking_config: ThinkingConfig | None = None


class GenerateContentRequest(_Wire):
    contents: list[Content]
    system_instruction: Content | None = None
    generation_config: GenerationConfig | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None



# --- answer (unknown fields ignored) -----------------------------------------------------------------------------

class _RWire(msgspec.Struct, rename="camel", gc=False):
    pass


class RFunctionCall(_RWire):
    name: str = ""
    args: dict[str, Any] | None = None
    id: str | None = None


class RPart(_RWire):
    text: str | None = None
    thought: bool = False
    thought_signature: str | None = None
    function_call: RFunctionCall | None = None


class RContent(_RWire):
    parts: list[RPart] = []
    role: str | None = None


class RCandidate(_RWire):
    content: RContent | None = None
    finish_reason: str | None = None
    index: int = 0


class RUsage(_RWire):
    prompt_token_count: int = 0
    candidates_token_count: int = 0
    total_token_count: int = 0
    cached_content_token_count: int = 0
    thoughts_token_count: int = 0


class RPromptFeedback(_RWire):
    block_reason: str | None = None
    block_reason_message: str | None = None


class GenerateContentResponse(_RWire):
    candidates: list[RCandidate] = []
    usage_metadata: RUsage | None = None
    model_version: str | None = None
    response_id: str | None = None
    prompt_feedback: RPromptFeedback | None = None
    error: Any = None


response_decoder = msgspec.json.Decoder(GenerateContentResponse)
