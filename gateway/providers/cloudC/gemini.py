"""cloudC Gemini mapping: a unified chat request -> generateContent body, a generateContent answer -> chat completion.

Request (unified -> Gemini):

- ``system`` and ``developer`` messages -> ``systemInstruction.parts`` (text); ``user`` -> role ``user``;
  ``assistant`` -> role ``model`` (text parts, ``tool_calls`` -> ``functionCall`` parts with the arguments decoded
  to an object); ``tool`` results -> ``functionResponse`` parts in a ``user`` turn (consecutive results share one
  turn; the function name is found from the matching ``tool_call_id``; a JSON-object result is sent as the
  response object, anything else as ``{"content": <text>}``); legacy ``function`` messages likewise.
- Content parts: ``text`` -> ``text``; ``image_url`` / ``file`` data URLs -> ``inlineData {mimeType, data}``;
  ``gs://`` and ``http(s)`` URLs -> ``fileData {mimeType, fileUri}`` (MIME type from the part or the extension).
- ``generationConfig``: temperature, topP, maxOutputTokens (max_completion_tokens or max_tokens), stopSequences,
  candidateCount (n), seed, presencePenalty, frequencyPenalty, responseMimeType ``application/json`` (+
  responseSchema from ``json_schema.schema``) for ``response_format``, thinkingConfig {includeThoughts,
  thinkingBudget} from ``thinking``.
- ``CHAT_FIELDS`` is the data of what happens to each unified field: ``logprobs: true`` / ``top_logprobs`` are a 400
  (answers do not carry generateContent's log probabilities back); ``logit_bias``, ``parallel_tool_calls``, ``user``
  and fields unknown here are dropped and named in ``x-gateway-dropped-params``.
- ``tools`` / legacy ``functions`` -> ``tools: [{functionDeclarations: [{name, description, parameters}]}]``;
  ``tool_choice`` -> ``toolConfig.functionCallingConfig`` mode AUTO / NONE / ANY (``required``) or ANY with
  ``allowedFunctionNames`` for a named function. Tool and response schemas are translated to the OpenAPI-subset
  Schema of generateContent (``schema.openapi_schema``: ``$ref`` inlined, unknown keywords left out).

Response (Gemini -> unified): each candidate is a choice; text parts joined; ``functionCall`` parts -> ``tool_calls``
(id from the part or generated, arguments JSON-encoded; a part's ``thoughtSignature`` is appended to the id after
``__thought__`` and put back on the ``functionCall`` part when the client sends that tool call in a later turn, as
thinking models require); ``finishReason`` STOP -> stop, MAX_TOKENS -> length,
SAFETY / RECITATION / BLOCKLIST / PROHIBITED_CONTENT / SPII (and the image / armor blocks) -> content_filter, any
function call -> tool_calls; a prompt blocked before generation (``promptFeedback.blockReason``, no candidates) is
one content_filter choice. ``usageMetadata``: promptTokenCount -> prompt_tokens, candidatesTokenCount +
thoughtsTokenCount -> completion_tokens, totalTokenCount -> total_tokens, cachedContentTokenCount ->
prompt_tokens_details.cached_tokens, thoughtsTokenCount -> completion_tokens_details.reasoning_tokens. Thought parts
(``thought: true``) become ``content_blocks`` (``{"type": "thinking", "thinking", "signature"}`` then
``{"type": "text", "text"}``) only when strict_vendorA_compliance is explicitly false, and are dropped otherwise.

Answers and chunks carry ``"system_fingerprint": null`` (generateContent has none).

Errors: ``{"error": {"code", "message", "status"}}`` (also inside a one-element array) -> the upstream status and
message, with ``status`` as the error code.

Wire facts (facts only) from the public references: the Gemini inference reference
(cloud.google.com/vertex-ai/generative-ai/docs/model-reference/overview: GenerateContentRequest fields contents,
systemInstruction, generationConfig, tools, toolConfig); the aiplatform v1 API types (Content, Part,
FunctionCallingConfig, GenerationConfig; Candidate.FinishReason values STOP, MAX_TOKENS, SAFETY, RECITATION, OTHER,
BLOCKLIST, PROHIBITED_CONTENT, SPII, MALFORMED_FUNCTION_CALL; UsageMetadata counts); Google's API error model
(``error.code`` / ``message`` / ``status``).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import msgspec

from gateway.http.errors import InvalidRequest, UpstreamError
from gateway.providers.base import malformed, snippet, upstream_error
from gateway.providers.cloudC.schema import openapi_schema
from gateway.providers.cloudC.wire import (
    Content,
    FileData,
    FunctionCall,
    FunctionCallingConfig,
    FunctionDeclaration,
    FunctionResponse,
    GenerateContentRequest,
    GenerationConfig,
    InlineData,
    Part,
    RCandidate,
    RFunctionCall,
    RUsage,
    ThinkingConfig,
    Tool,
    ToolConfig,
    response_decoder,
)
from gateway.providers.fields import FieldTable, is_true, present
from gateway.schema.common import Usage

PROVIDER = "cloudC"
_encode = msgspec.json.encode
_decode = msgspec.json.decode
_request_encoder = msgspec.json.Encoder()
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*?;base64,(?P<data>.*)$", re.S)
_MIME_BY_EXT = {
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
    "heic": "image/heic", "heif": "image/heif", "pdf": "application/pdf", "txt": "text/plain",
    "mp3": "audio/mpeg", "wav": "audio/wav", "flac": "audio/flac", "ogg": "audio/ogg", "mp4": "video/mp4",
    "mov": "video/quicktime", "webm": "video/webm", "mpeg": "video/mpeg", "avi": "video/x-msvideo",
}
_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
#: the chat fields generateContent takes (as they are or translated) and refuses; any other field is dropped
CHAT_FIELDS = FieldTable(
    taken=frozenset({"messages", "model", "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "n",
                     "seed", "presence_penalty", "frequency_penalty", "response_format", "thinking", "tools",
                     "functions", "tool_choice", "function_call", "stream", "stream_options"}),
    refused={
        "logprobs": (is_true, "logprobs is not supported by cloudC (the gateway does not return generateContent "
                              "log probabilities)"),
        "top_logprobs": (present, "top_logprobs is not supported by cloudC (the gateway does not return "
                                  "generateContent log probabilities)"),
    },
)
#: a functionCall part's thoughtSignature travels in the tool call's id after this mark, so that the client echoing
#: the id back in the next turn echoes the signature the model needs to see with its own function call
SIGNATURE_MARK = "__thought__"


def _mime_for(url: str, field: str) -> str:
    path = url.split("?", 1)[0].rsplit("/", 1)[-1]
    ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    mime = _MIME_BY_EXT.get(ext)
    if mime is None:
        raise InvalidRequest(f"{field}: cannot tell the MIME type of {url!r}; add mime_type to the part", param=field)
    return mime


def media_part(url: str, mime: str | None, field: str) -> Part:
    """``data:`` URL -> inlineData; ``gs://`` / ``http(s)://`` -> fileData."""
    if url.startswith("data:"):
        match = _DATA_URL.match(url)
        if match is None:
            raise InvalidRequest(f"{field} must be a base64 data URL (data:<mime>;base64,<data>)", param=field)
        return Part(inline_data=InlineData(mime or match.group("mime") or "application/octet-stream",
                                           match.group("data")))
    if url.startswith(("gs://", "https://", "http://")):
        return Part(file_data=FileData(mime or _mime_for(url, field), url))
    raise InvalidRequest(f"{field} must be a data:, gs:// or https:// URL", param=field)


def content_parts(content: Any, field: str) -> list[Part]:
    """A message's ``content`` (string or parts) as Gemini parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(text=content)]
    parts = []
    for i, item in enumerate(content):
        where = f"{field}[{i}]"
        kind = item.get("type")
        if kind == "text":
            text = item.get("text")
            if not isinstance(text, str):
                raise InvalidRequest(f"{where}.text must be a string", param=f"{where}.text")
            parts.append(Part(text=text))
        elif kind == "image_url":
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise InvalidRequest(f"{where}.image_url.url must be a string", param=f"{where}.image_url.url")
            mime = image.get("mime_type") if isinstance(image, dict) else None
            parts.append(media_part(url, mime, f"{where}.image_url.url"))
        elif kind == "file":
            file = item.get("file") or {}
            url = file.get("file_data") or file.get("file_id") or file.get("file_url")
            if not isinstance(url, str):
                raise InvalidRequest(f"{where}.file needs file_data (a data URL) or file_id (a gs:// URI)",
                                     param=f"{where}.file")
            parts.append(media_part(url, file.get("mime_type") or file.get("format"), f"{where}.file"))
        else:
            raise InvalidRequest(f"{where}.type {kind!r} is not supported by cloudC", param=f"{where}.type")
    return parts


def _text_of(content: Any, field: str) -> list[Part]:
    parts = content_parts(content, field)
    for part in parts:
        if part.text is None:
            raise InvalidRequest(f"{field} may hold only text for a system message", param=field)
    return parts


def _args(arguments: str | None, field: str) -> dict[str, Any]:
    if not arguments:
        return {}
    try:
        value = _decode(arguments)
    except msgspec.DecodeError:
        raise InvalidRequest(f"{field} is not valid JSON", param=field) from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"{field} must be a JSON object", param=field)
    return value


def _result(content: Any) -> dict[str, Any]:
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        return {"content": ""}
    if content[:1] == "{":
        try:
            value = _decode(content)
        except msgspec.DecodeError:
            value = None
        if isinstance(value, dict):
            return value
    return {"content": content}


def build_contents(messages: list) -> tuple[list[Content], Content | None]:
    """Messages -> (contents, systemInstruction)."""
    contents: list[Content] = []
    system: list[Part] = []
    call_names: dict[str, str] = {}
    pending: list[Part] | None = None  # functionResponse parts of the current run of tool messages
    for i, message in enumerate(messages):
        role = message.role
        field = f"messages[{i}]"
        if role in ("tool", "function"):
            name = message.name if role == "function" else call_names.get(message.tool_call_id or "", message.name)
            if not name:
                raise InvalidRequest(
                    f"{field}.tool_call_id does not match a tool call of an earlier assistant message",
                    param=f"{field}.tool_call_id",
                )
            part = Part(function_response=FunctionResponse(name, _result(message.content)))
            if pending is None:
                pending = [part]
                contents.append(Content(pending, "user"))
            else:
                pending.append(part)
            continue
        pending = None
        if role in ("system", "developer"):
            system.extend(_text_of(message.content, f"{field}.content"))
        elif role == "user":
            parts = content_parts(message.content, f"{field}.content")
            if parts:
                contents.append(Content(parts, "user"))
        else:  # assistant
            parts = content_parts(message.content, f"{field}.content")
            if message.tool_calls:
                for j, call in enumerate(message.tool_calls):
                    fn = call.function
                    if fn is None or not fn.name:
                        raise InvalidRequest(f"{field}.tool_calls[{j}].function.name is required",
                                             param=f"{field}.tool_calls[{j}].function.name")
                    signature = None
                    if call.id:
                        call_names[call.id] = fn.name
                        if SIGNATURE_MARK in call.id:
                            signature = call.id.split(SIGNATURE_MARK, 1)[1] or None
                    parts.append(Part(function_call=FunctionCall(
                        fn.name, _args(fn.arguments, f"{field}.tool_calls[{j}].function.arguments")),
                        thought_signature=signature))
            elif message.function_call is not None and message.function_call.name:
                fn = message.function_call
                parts.append(Part(function_call=FunctionCall(
                    fn.name, _args(fn.arguments, f"{field}.function_call.arguments"))))
            if parts:
                contents.append(Content(parts, "model"))
    if not contents:
        raise InvalidRequest("cloudC needs at least one user or assistant message", param="messages")
    return contents, (Content(system) if system else None)


def _tools(request: Any) -> list[Tool] | None:
    declarations = []
    if request.tools:
        for tool in request.tools:
            fn = tool.function
            declarations.append(FunctionDeclaration(fn.name, fn.description, openapi_schema(fn.parameters)))
    elif request.functions:
        for fn in request.functions:
            declarations.append(FunctionDeclaration(fn.name, fn.description, openapi_schema(fn.parameters)))
    return [Tool(declarations)] if declarations else None


def _tool_config(request: Any) -> ToolConfig | None:
    choice = request.tool_choice if request.tool_choice is not None else request.function_call
    if choice is None:
        return None
    if isinstance(choice, str):
        mode = _TOOL_MODES.get(choice)
        return ToolConfig(FunctionCallingConfig(mode)) if mode else None
    name = choice.get("function", {}).get("name") if "function" in choice else choice.get("name")
    return ToolConfig(FunctionCallingConfig("ANY", [name]))


def _generation_config(request: Any) -> GenerationConfig | None:
    max_tokens = request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens
    stop = request.stop
    mime = schema = None
    fmt = request.response_format
    if fmt:
        kind = fmt.get("type")
        if kind == "json_object":
            mime = "application/json"
        elif kind == "json_schema":  # checked when the body was decoded: json_schema.schema is an object
            mime = "application/json"
            schema = openapi_schema(fmt["json_schema"]["schema"])
    thinking = None
    if request.thinking:
        if request.thinking.get("type") == "disabled":
            thinking = ThinkingConfig(thinking_budget=0)
        else:
            budget = request.thinking.get("budget_tokens")
            thinking = ThinkingConfig(True, budget if isinstance(budget, int) else None)
    config = GenerationConfig(
        temperature=request.temperature,
        top_p=request.top_p,
        max_output_tokens=max_tokens,
        stop_sequences=[stop] if isinstance(stop, str) else stop,
        candidate_count=request.n,
        seed=request.seed,
        presence_penalty=request.presence_penalty,
        frequency_penalty=request.frequency_penalty,
        response_mime_type=mime,
        response_schema=schema,
        thinking_config=thinking,
    )
    return None if config == _EMPTY_CONFIG else config


_EMPTY_CONFIG = GenerationConfig()


def build_request(request: Any) -> bytes:
    """The generateContent body for a unified chat request (a ``ChatRequest``)."""
    CHAT_FIELDS.refuse(request)
    contents, system = build_contents(request.messages)
    body = GenerateContentRequest(
        contents=contents,
        system_instruction=system,
        generation_config=_generation_config(request),
        tools=_tools(request),
        tool_config=_tool_config(request),
    )
    return _request_encoder.encode(body)


# --- answer --------------------------------------------------------------------------------------------------

_response_encoder = msgspec.json.Encoder()
_FILTERED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                       "MODEL_ARMOR", "IMAGE_PROHIBITED_CONTENT"})


def finish_reason(reason: str | None, has_calls: bool) -> str:
    if has_calls:
        return "tool_calls"
    if reason == "MAX_TOKENS":
        return "length"
    if reason in _FILTERED:
        return "content_filter"
    return "stop"


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def tool_call(call: RFunctionCall, signature: str | None = None) -> dict[str, Any]:
    """A unified tool call; a thought signature rides in the id (see ``SIGNATURE_MARK``)."""
    call_id = call.id or new_call_id()
    if signature:
        call_id += SIGNATURE_MARK + signature
    return {"id": call_id, "type": "function",
            "function": {"name": call.name, "arguments": _encode(call.args or {}).decode()}}


def usage_doc(usage: RUsage | None) -> tuple[dict[str, Any], Usage]:
    """The unified usage object and the Usage record of a usageMetadata."""
    if usage is None:
        usage = RUsage()
    completion = usage.candidates_token_count + usage.thoughts_token_count
    total = usage.total_token_count or usage.prompt_token_count + completion
    doc: dict[str, Any] = {"prompt_tokens": usage.prompt_token_count, "completion_tokens": completion,
                           "total_tokens": total}
    if usage.cached_content_token_count:
        doc["prompt_tokens_details"] = {"cached_tokens": usage.cached_content_token_count}
    if usage.thoughts_token_count:
        doc["completion_tokens_details"] = {"reasoning_tokens": usage.thoughts_token_count}
    return doc, Usage(usage.prompt_token_count, completion, total)


def completion_id(response_id: str | None) -> str:
    return "chatcmpl-" + (response_id or uuid.uuid4().hex)


def _choice(candidate: RCandidate, thoughts: bool) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] | None = [] if thoughts else None
    parts = candidate.content.parts if candidate.content is not None else ()
    for part in parts:
        if part.function_call is not None:
            calls.append(tool_call(part.function_call, part.thought_signature))
        elif part.text is not None:
            if part.thought:
                if blocks is not None:
                    block = {"type": "thinking", "thinking": part.text}
                    if part.thought_signature:
                        block["signature"] = part.thought_signature
                    blocks.append(block)
                continue
            texts.append(part.text)
    text = "".join(texts)
    message: dict[str, Any] = {"role": "assistant", "content": text if (text or not calls) else None}
    if calls:
        message["tool_calls"] = calls
    if blocks:
        if text:
            blocks.append({"type": "text", "text": text})
        message["content_blocks"] = blocks
    return {"index": candidate.index, "message": message, "logprobs": None,
            "finish_reason": finish_reason(candidate.finish_reason, bool(calls))}


def parse_response(body: bytes, model: str | None, thoughts: bool, headers: Any = None
                   ) -> tuple[bytes, Usage, str | None]:
    """A generateContent answer -> (chat completion bytes, usage, model)."""
    try:
        doc = response_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise malformed(PROVIDER, "not a generateContent response", body) from None
    if doc.error is not None:
        raise google_error(502, body, headers)
    if doc.candidates:
        choices = [_choice(c, thoughts) for c in doc.candidates]
    elif doc.prompt_feedback is not None and doc.prompt_feedback.block_reason:
        choices = [{"index": 0, "message": {"role": "assistant", "content": None}, "logprobs": None,
                    "finish_reason": "content_filter"}]
    else:
        raise malformed(PROVIDER, "no candidates", body)
    usage, record = usage_doc(doc.usage_metadata)
    model_name = doc.model_version or model
    out = {"id": completion_id(doc.response_id), "object": "chat.completion", "created": int(time.time()),
           "model": model_name, "system_fingerprint": None, "choices": choices, "usage": usage}
    return _response_encoder.encode(out), record, model_name


# --- errors --------------------------------------------------------------------------------------------------

class _GoogleErrorDetail(msgspec.Struct):
    code: int | None = None
    message: str | None = None
    status: str | None = None


class _GoogleError(msgspec.Struct):
    error: _GoogleErrorDetail | str | None = None
    error_description: str | None = None


_error_decoder = msgspec.json.Decoder(_GoogleError | list[_GoogleError])


def google_error(status: int, body: bytes, headers: Any = None) -> UpstreamError:
    """Google's error model (``{"error": {"code", "message", "status"}}``) -> the status and message relayed."""
    message = code = None
    try:
        doc = _error_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        doc = None
    if isinstance(doc, list):
        doc = doc[0] if doc else None
    if doc is not None:
        if isinstance(doc.error, _GoogleErrorDetail):
            message = doc.error.message
            code = doc.error.status
            if status < 400 and doc.error.code and 400 <= doc.error.code <= 599:
                status = doc.error.code
        elif isinstance(doc.error, str):
            message = doc.error_description or doc.error
            code = doc.error
    if not message:
        message = f"{PROVIDER} returned HTTP {status}" + (f": {snippet(body)}" if body else "")
    return upstream_error(PROVIDER, status, body, headers, message=message, code=code)
