"""Mock of the vendorA wire format: chat completions, text completions (streamed and not), embeddings, moderations.

Realistic ids (``chatcmpl-…``, ``cmpl-…``), ``created``, ``system_fingerprint``, usage, data-only SSE ending in
``data: [DONE]``, ``stream_options.include_usage`` honoured (``"usage": null`` on every chunk, then a last chunk
with empty ``choices`` and the figures), errors as ``{"error": {message, type, param, code}}``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import sys
import time
from array import array

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

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.randbelow(10 ** 8):08d}{int(time.time() * 1000) % 100000:05d}"


def _prompt_text(req: MockRequest) -> str:
    doc = req.json()
    if "messages" in doc:
        parts = []
        for message in doc.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
        return " ".join(parts)
    prompt = doc.get("prompt", "")
    return prompt if isinstance(prompt, str) else " ".join(map(str, prompt))


async def error(req: MockRequest, send: Send) -> None:
    step = req.step
    status = step.status
    doc = {"error": {"message": step.message or f"mock upstream error {status}",
                     "type": step.error_type or _ERROR_TYPES.get(status, "server_error"),
                     "param": None, "code": step.error_type or None}}
    await respond_json(send, status, doc, retry_headers(step))


#: the most completion tokens a model takes (vendorA answers 400 above it); models not listed take any
_MAX_COMPLETION_TOKENS = {"gpt-4o": 16_384, "gpt-4o-mini": 16_384, "gpt-4-turbo": 4_096, "gpt-3.5-turbo": 4_096}


def _too_many_tokens(doc: dict) -> str | None:
    """vendorA's 400 message for a ``max_tokens`` / ``max_completion_tokens`` above the model's maximum."""
    model = str(doc.get("model") or "")
    limit = _MAX_COMPLETION_TOKENS.get(model) or _MAX_COMPLETION_TOKENS.get(model[:-11])  # a dated snapshot
    asked = doc.get("max_completion_tokens") or doc.get("max_tokens")
    if limit is None or not isinstance(asked, int) or asked <= limit:
        return None
    return (f"max_tokens is too large: {asked}. This model supports at most {limit} completion tokens, whereas you "
            f"provided {asked}.")


def _usage(prompt: str, completion: str) -> dict:
    p, c = count_tokens(prompt), count_tokens(completion)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


async def chat(req: MockRequest, send: Send) -> None:
    doc = req.json()
    too_many = _too_many_tokens(doc)
    if too_many is not None:
        await respond_json(send, 400, {"error": {"message": too_many, "type": "invalid_request_error",
                                                 "param": "max_tokens", "code": "invalid_value"}})
        return
    model = doc.get("model", "mock-model")
    step = req.step
    reply = req.reply_text()
    created = int(time.time())
    cid = new_id("chatcmpl")
    tools = doc.get("tools")
    if not doc.get("stream"):
        message: dict = {"role": "assistant", "content": reply, "refusal": None}
        finish = "stop"
        if step.tool_call and tools:
            name = tools[0]["function"]["name"]
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_" + hashlib.md5(cid.encode()).hexdigest()[:24], "type": "function",
                 "function": {"name": name, "arguments": '{"location": "Paris"}'}}]}
            finish = "tool_calls"
        body = {
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": "fp_mock", "choices": [
                {"index": i, "message": message, "logprobs": None, "finish_reason": finish}
                for i in range(doc.get("n") or 1)],
            "usage": _usage(_prompt_text(req), reply),
        }
        if step.no_usage:
            del body["usage"]
        await respond_json(send, 200, body)
        return
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": "fp_mock"}
    wants_usage = bool((doc.get("stream_options") or {}).get("include_usage")) and not step.no_usage
    if wants_usage:
        base["usage"] = None  # as vendorA: every chunk carries "usage": null, the last one the figures
    await start_stream(send)
    if step.stream_error == "first":
        await end_stream(send, sse({"error": {"message": step.message or "mock in-band error",
                                              "type": "server_error", "param": None, "code": None}}))
        return
    await stream_part(send, sse({**base, "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]}))
    if step.stream_error == "burst":  # content and an error in one write: they reach the gateway in one read
        burst = b"".join(sse({**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
                         for p in req.reply_words()[:3])
        await end_stream(send, burst + sse({"error": {"message": step.message or "mock error after a burst",
                                                      "type": "server_error", "param": None, "code": None}}))
        return
    pieces = req.reply_words()
    half = len(pieces) // 2
    if step.tool_call and tools:
        name = tools[0]["function"]["name"]
        await stream_part(send, sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_mock", "type": "function", "function": {"name": name, "arguments": ""}}]},
            "finish_reason": None}]}), step)
        for part in ('{"location"', ': "Paris"}'):
            await stream_part(send, sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": part}}]}, "finish_reason": None}]}), step)
        pieces, finish = [], "tool_calls"
    else:
        finish = "stop"
    for i, piece in enumerate(pieces):
        if i == half and step.stream_error == "middle":
            await end_stream(send, sse({"error": {"message": step.message or "mock error midway",
                                                  "type": "server_error", "param": None, "code": None}}))
            return
        if i == half and step.stream_error == "cut":
            raise ConnectionResetError("mock cuts the stream")
        await stream_part(send, sse({**base, "choices": [
            {"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}]}), step)
    await stream_part(send, sse({**base, "choices": [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]}))
    if wants_usage:
        await stream_part(send, sse({**base, "choices": [], "usage": _usage(_prompt_text(req), req.reply_text())}))
    await end_stream(send, b"data: [DONE]\n\n")


async def completions(req: MockRequest, send: Send) -> None:
    doc = req.json()
    model = doc.get("model", "mock-instruct")
    reply = req.reply_text()
    cid = new_id("cmpl")
    created = int(time.time())
    step = req.step
    if not doc.get("stream"):
        body = {
            "id": cid, "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "text": reply, "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(_prompt_text(req), reply),
        }
        if step.no_usage:
            del body["usage"]
        await respond_json(send, 200, body)
        return
    await start_stream(send)
    if req.step.stream_error == "first":
        await end_stream(send, sse({"error": {"message": "mock in-band error", "type": "server_error"}}))
        return
    base = {"id": cid, "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": "fp_mock"}
    wants_usage = bool((doc.get("stream_options") or {}).get("include_usage")) and not step.no_usage
    if wants_usage:
        base["usage"] = None
    for piece in req.reply_words():
        await stream_part(send, sse({**base, "choices": [
            {"index": 0, "text": piece, "logprobs": None, "finish_reason": None}]}), req.step)
    await stream_part(send, sse({**base, "choices": [
        {"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}]}))
    if wants_usage:
        await stream_part(send, sse({**base, "choices": [], "usage": _usage(_prompt_text(req), reply)}))
    await end_stream(send, b"data: [DONE]\n\n")


def embedding_vector(text: str, dims: int = 8) -> list[float]:
    """A deterministic unit-ish vector for a text, of any length (the text's SHA-256 chain, one byte a value)."""
    digest = b""
    block = text.encode()
    while len(digest) < dims:
        block = hashlib.sha256(block).digest()
        digest += block
    return [round((digest[i] - 127.5) / 127.5, 6) for i in range(dims)]


def _float32_base64(vector: list[float]) -> str:
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


async def _invalid(send: Send, message: str, param: str | None, status: int = 400,
                   code: str | None = None) -> None:
    await respond_json(send, status, {"error": {"message": message, "type": "invalid_request_error",
                                                "param": param, "code": code}})


async def embeddings(req: MockRequest, send: Send) -> None:
    """vendorA embeddings: ``model`` and a non-empty ``input`` (string, strings, tokens or token arrays) required;
    ``dimensions`` sets the vector length (8 by default here); ``encoding_format: base64`` answers the base64 of
    little-endian float32 values, as vendorA does."""
    doc = req.json()
    if not isinstance(doc.get("model"), str) or not doc["model"]:
        await _invalid(send, "you must provide a model parameter", None)
        return
    inputs = doc.get("input")
    if isinstance(inputs, str):
        items: list = [inputs]
    elif isinstance(inputs, list) and inputs and all(isinstance(t, int) for t in inputs):
        items = [inputs]
    else:
        items = inputs if isinstance(inputs, list) else []
    if not items or any(t == "" or t == [] for t in items):
        await _invalid(send, "'$.input' is invalid. Please check the API reference.", "input")
        return
    encoding = doc.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        await _invalid(send, f"Invalid value for 'encoding_format': {encoding!r}", "encoding_format")
        return
    dims = doc.get("dimensions") or 8
    if not isinstance(dims, int) or dims < 1:
        await _invalid(send, "Invalid value for 'dimensions': must be a positive integer", "dimensions")
        return
    data = []
    for i, item in enumerate(items):
        vector = embedding_vector(item if isinstance(item, str) else " ".join(map(str, item)), dims)
        data.append({"object": "embedding", "index": i,
                     "embedding": _float32_base64(vector) if encoding == "base64" else vector})
    tokens = sum(count_tokens(t) if isinstance(t, str) else len(t) for t in items)
    await respond_json(send, 200, {"object": "list", "data": data, "model": doc["model"],
                                   "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


MODERATION_CATEGORIES = ("hate", "hate/threatening", "harassment", "harassment/threatening", "self-harm",
                         "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
                         "violence/graphic")
OMNI_CATEGORIES = MODERATION_CATEGORIES + ("illicit", "illicit/violent")
# words that flag a category (deterministic stand-ins for a classifier)
MODERATION_TRIGGERS = {
    "violence": ("kill", "murder", "attack"),
    "violence/graphic": ("gore", "dismember"),
    "harassment": ("idiot", "loser"),
    "harassment/threatening": ("find you",),
    "hate": ("hateful",),
    "self-harm": ("hurt myself",),
    "illicit": ("steal",),
}
MODERATION_MODELS = {"text-moderation-latest": "text-moderation-007", "text-moderation-stable": "text-moderation-007",
                     "omni-moderation-latest": "omni-moderation-2024-09-26"}


async def moderations(req: MockRequest, send: Send) -> None:
    """vendorA moderations: ``input`` required (a string, strings, or for omni models text/image parts); the answer
    names the resolved model snapshot and has one result per input with every category (omni models add
    ``illicit``, ``illicit/violent`` and ``category_applied_input_types``). Omitting ``model`` means vendorA's
    current default, ``omni-moderation-latest``."""
    doc = req.json()
    if "input" not in doc:
        await _invalid(send, "Missing required parameter: 'input'.", "input")
        return
    requested = doc.get("model") or "omni-moderation-latest"
    if requested in MODERATION_MODELS:
        model = MODERATION_MODELS[requested]
    elif requested.startswith(("omni-moderation-", "text-moderation-")):
        model = requested
    else:
        await _invalid(send, f"The model `{requested}` does not exist or you do not have access to it.", "model",
                       404, "model_not_found")
        return
    omni = model.startswith("omni-")
    inputs = doc["input"]
    if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict):
        if not omni:
            await _invalid(send, f"Model {model} does not support image inputs.", "input")
            return
        text = " ".join(p.get("text", "") for p in inputs if p.get("type") == "text")
        kinds = ["text"] + (["image"] if any(p.get("type") == "image_url" for p in inputs) else [])
        entries = [(text, kinds)]
    else:
        items = inputs if isinstance(inputs, list) else [inputs]
        entries = [(str(item), ["text"]) for item in items]
    names = OMNI_CATEGORIES if omni else MODERATION_CATEGORIES
    results = []
    for text, kinds in entries:
        lowered = text.lower()
        hits = {c for c, words in MODERATION_TRIGGERS.items() if c in names and any(w in lowered for w in words)}
        result = {
            "flagged": bool(hits),
            "categories": {c: c in hits for c in names},
            "category_scores": {c: (0.91 if c in hits else 0.0001) for c in names},
        }
        if omni:
            result["category_applied_input_types"] = {
                c: (kinds if c in ("violence", "violence/graphic", "sexual", "self-harm", "self-harm/intent",
                                   "self-harm/instructions") else ["text"]) for c in names}
        results.append(result)
    await respond_json(send, 200, {"id": new_id("modr"), "model": model, "results": results})


ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/chat/completions$"), chat),
    ("POST", re.compile(r"^(?:/v1)?/completions$"), completions),
    ("POST", re.compile(r"^(?:/v1)?/embeddings$"), embeddings),
    ("POST", re.compile(r"^(?:/v1)?/moderations$"), moderations),
]
