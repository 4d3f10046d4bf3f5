"""Mock of cloudB resource deployments: ``/openai/deployments/{id}/...`` with api-key auth and api-version.

Bodies come from the vendorA mock handlers. Like the real service: a missing or empty ``api-key`` header is a 401,
a missing ``api-version`` query a 404, both in cloudB's error format ``{"error": {"code", "message"}}``; streamed
chat opens with a ``prompt_filter_results`` chunk whose ``choices`` is empty (and ``id``, ``object``, ``model``
empty); a step's ``filter_annotations`` adds the asynchronous content filter's annotation chunk before ``[DONE]``.
Scripted errors use the same format. The resource's files, batches, fine-tuning and stored-responses paths
(``/openai/files``...) answer like the vendorA mock's, behind the same checks, and so do the deployments' images
(generations, edits) and audio routes (``vendorA_media``).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs

from gateway_mock import (
    vendorA,
    vendorA_batches,
    vendorA_files,
    vendorA_fine_tuning,
    vendorA_media,
    vendorA_responses,
)
from gateway_mock.asgi import Message, Send
from gateway_mock.kit import Handler, MockRequest, respond_json, retry_headers, sse

_CODES = {400: "BadRequest", 401: "401", 403: "Forbidden", 404: "DeploymentNotFound", 408: "Timeout",
          429: "429", 500: "InternalServerError", 503: "ServiceUnavailable"}
_UNAUTHORIZED = ("Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
                 "valid key for an active subscription and use a correct regional API endpoint for your resource.")
_PROMPT_FILTER: dict[str, Any] = {
    "choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": [
    {"prompt_index": 0, "content_filter_results": {
        "hate": {"filtered": False, "severity": "safe"}, "self_harm": {"filtered": False, "severity": "safe"},
        "sexual": {"filtered": False, "severity": "safe"}, "violence": {"filtered": False, "severity": "safe"}}}]}


def azure_error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


async def error(req: MockRequest, send: Send) -> None:
    step = req.step
    status = step.status
    code = step.error_type or _CODES.get(status, str(status))
    await respond_json(send, status, azure_error(code, step.message or f"mock cloudB error {status}"),
                       retry_headers(step))


def _checked(handler: Handler) -> Handler:
    async def handle(req: MockRequest, send: Send) -> None:
        if not req.headers.get("api-key"):
            await respond_json(send, 401, azure_error("401", _UNAUTHORIZED))
            return
        if not parse_qs(req.query).get("api-version"):
            await respond_json(send, 404, azure_error("404", "Resource not found"))
            return
        await handler(req, send)

    return handle


_SAFE_RESULTS = _PROMPT_FILTER["prompt_filter_results"][0]["content_filter_results"]
_ANNOTATION = {"choices": [{"index": 0, "finish_reason": None, "content_filter_results": _SAFE_RESULTS,
                            "content_filter_offsets": {"check_offset": 0, "start_offset": 0, "end_offset": 120}}],
               "created": 0, "id": "", "model": "", "object": ""}


async def _chat(req: MockRequest, send: Send) -> None:
    if not req.json().get("stream"):
        await vendorA.chat(req, send)
        return
    opened = False

    async def send_with_filter_chunk(message: Message) -> None:
        nonlocal opened
        if message["type"] == "http.response.body" and not opened:
            opened = True
            message = {**message, "body": sse(_PROMPT_FILTER) + message.get("body", b"")}
        if (req.step.filter_annotations and message["type"] == "http.response.body"
                and message.get("body", b"").startswith(b"data: [DONE]")):
            message = {**message, "body": sse(_ANNOTATION) + message["body"]}
        await send(message)

    await vendorA.chat(req, send_with_filter_chunk)


_BASE = r"^/openai/deployments/(?P<deployment>[^/]+)/"
ROUTES = [
    ("POST", re.compile(_BASE + r"chat/completions$"), _checked(_chat)),
    ("POST", re.compile(_BASE + r"completions$"), _checked(vendorA.completions)),
    ("POST", re.compile(_BASE + r"embeddings$"), _checked(vendorA.embeddings)),
]
# files, batches, fine-tuning jobs and stored responses live on the resource: /openai/files?api-version=...
for _module in (vendorA_files, vendorA_batches, vendorA_fine_tuning, vendorA_responses):
    for _method, _pattern, _handler in _module.ROUTES:
        ROUTES.append((_method, re.compile(_pattern.pattern.replace("^(?:/v1)?", "^/openai")), _checked(_handler)))
# images and audio on deployments: /openai/deployments/{id}/images/generations?api-version=... (no variations)
for _method, _pattern, _handler in vendorA_media.ROUTES:
    if "variations" not in _pattern.pattern:
        ROUTES.append((_method, re.compile(_pattern.pattern.replace("^(?:/v1)?/", _BASE)), _checked(_handler)))
