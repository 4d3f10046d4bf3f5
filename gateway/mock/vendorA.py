"""Mock of the vendorA wire format: chat completions, text completions (streamed and not), embeddings, moderations.

Realistic ids (``chatcmpl-…``, ``cmpl-…``), ``created``, ``system_fingerprint``, usage, data-only SSE ending in
``data: [DONE]``, ``stream_options.include_usage`` honoured, errors as ``{"error": {message, type, param, code}}``.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time

from gateway.mock.kit import (
    MockRequest,
    Send,
    count_tokens,
    end_stream,
    respond,
    respond_json,
    retry_headers,
    sse,
    start_stream,
    stream_part,
)

_ids = itertools.count(1)
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids):08d}{int(time.time() * 1000) % 100000:05d}"


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


def _usage(prompt: str, completion: str) -> dict:
    p, c = count_tokens(prompt), count_tokens(completion)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


async def chat(req: MockRequest, send: Send) -> None:
    doc = req.json()
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
        await respond_json(send, 200, body)
        return
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": "fp_mock"}
    await start_stream(send)
    if step.stream_error == "first":
        await end_stream(send, sse({"error": {"message": step.message or "mock in-band error",
                                              "type": "server_error", "param": None, "code": None}}))
        return
    await stream_part(send, sse({**base, "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]}))
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
    if (doc.get("stream_options") or {}).get("include_usage"):
        await stream_part(send, sse({**base, "choices": [], "usage": _usage(_prompt_text(req), req.reply_text())}))
    await end_stream(send, b"data: [DONE]\n\n")


async def completions(req: MockRequest, send: Send) -> None:
    doc = req.json()
    model = doc.get("model", "mock-instruct")
    reply = req.reply_text()
    cid = new_id("cmpl")
    created = int(time.time())
    if not doc.get("stream"):
        await respond_json(send, 200, {
            "id": cid, "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "text": reply, "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(_prompt_text(req), reply),
        })
        return
    await start_stream(send)
    if req.step.stream_error == "first":
        await end_stream(send, sse({"error": {"message": "mock in-band error", "type": "server_error"}}))
        return
    base = {"id": cid, "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": "fp_mock"}
    for piece in req.reply_words():
        await stream_part(send, sse({**base, "choices": [
            {"index": 0, "text": piece, "logprobs": None, "finish_reason": None}]}), req.step)
    await stream_part(send, sse({**base, "choices": [
        {"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}]}))
    if (doc.get("stream_options") or {}).get("include_usage"):
        await stream_part(send, sse({**base, "choices": [], "usage": _usage(_prompt_text(req), reply)}))
    await end_stream(send, b"data: [DONE]\n\n")


def embedding_vector(text: str, dims: int = 8) -> list[float]:
    """A deterministic unit-ish vector for a text."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round((digest[i] - 127.5) / 127.5, 6) for i in range(dims)]


async def embeddings(req: MockRequest, send: Send) -> None:
    doc = req.json()
    inputs = doc.get("input", "")
    items = inputs if isinstance(inputs, list) else [inputs]
    data = [{"object": "embedding", "index": i, "embedding": embedding_vector(str(t), doc.get("dimensions") or 8)}
            for i, t in enumerate(items)]
    tokens = sum(count_tokens(str(t)) for t in items)
    await respond_json(send, 200, {"object": "list", "data": data, "model": doc.get("model", "mock-embed"),
                                   "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


MODERATION_CATEGORIES = ("hate", "hate/threatening", "harassment", "harassment/threatening", "self-harm",
                         "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
                         "violence/graphic")


async def moderations(req: MockRequest, send: Send) -> None:
    doc = req.json()
    inputs = doc.get("input", "")
    items = inputs if isinstance(inputs, list) else [inputs]
    results = []
    for text in items:
        flagged = "kill" in str(text).lower()
        results.append({
            "flagged": flagged,
            "categories": {c: (flagged and c == "violence") for c in MODERATION_CATEGORIES},
            "category_scores": {c: (0.91 if flagged and c == "violence" else 0.0001) for c in MODERATION_CATEGORIES},
        })
    await respond_json(send, 200, {"id": new_id("modr"), "model": doc.get("model") or "text-moderation-latest",
                                   "results": results})


ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/chat/completions$"), chat),
    ("POST", re.compile(r"^(?:/v1)?/completions$"), completions),
    ("POST", re.compile(r"^(?:/v1)?/embeddings$"), embeddings),
    ("POST", re.compile(r"^(?:/v1)?/moderations$"), moderations),
]
