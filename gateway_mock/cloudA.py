"""Mock of cloudA Converse / ConverseStream: verifies every request's SigV4 signature, answers like the service.

Every request is authenticated first, as the service does: the ``Authorization`` header is parsed, the access key
looked up in ``CREDENTIALS`` (a temporary key also needs its session token in ``X-Amz-Security-Token``), and the
signature recomputed from the request's own method, path, signed headers and body; any failure is a 403 in AWS's
error format (``x-amzn-ErrorType`` header, ``{"message"}`` body). Bodies are validated as Converse does
(alternating roles starting with ``user``, no blank text, ``toolConfig`` required alongside tool blocks) and
answered with Converse JSON, or for ``converse-stream`` with real ``application/vnd.amazon.eventstream`` frames
(``:event-type`` / ``:content-type`` / ``:message-type`` headers, a ``p`` padding member like the service sends).

Scenario knobs (see kit): ``status``/``message``/``error_type`` (AWS error types, e.g. ``ThrottlingException``),
``reply``, ``chunks``, ``chunk_delay_ms``, ``tool_call`` / ``tool_name``, ``stream_error`` (``first`` / ``middle``: an
exception frame, ``error_type`` naming it, e.g. ``throttlingException``; ``cut``: the connection drops midway).
A ``toolConfig.toolChoice`` of ``{tool: {name}}`` (a name that must be among the tools) or ``{any: {}}`` forces a
``toolUse`` answer without text; its input is made from the tool's ``inputSchema.json`` (``schema_sample``).

The signed path is checked against the raw request path exactly as it came on the wire (``MockRequest.raw_path``,
scenario prefix included), so a client that sends ``:`` where it signed ``%3A`` fails as it would against AWS.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import unquote

import msgspec

from gateway_mock import anthropic, eventstream, sigv4
from gateway_mock.asgi import Send
from gateway_mock.kit import (
    MockRequest,
    count_tokens,
    end_stream,
    respond_json,
    retry_headers,
    start_stream,
    stream_part,
)
from gateway_mock.schema_sample import sample

SERVICE = "bedrock"
#: access key id -> (secret access key, session token a request must carry or None)
CREDENTIALS: dict[str, tuple[str, str | None]] = {
    "AKIDMOCKEXAMPLE": ("wJalrXUtnFEMI/K7MDENG+bPxRfiCYMOCKEXAMPLEKEY", None),
    "ASIAMOCKEXAMPLE": ("je7MtGbClwBF/2Zp9Utk/h3yCo8nvbMOCKEXAMPLEKEY", "MOCKSESSIONTOKEN//////////wEXAMPLEtc764bNrC9"),
}
MAX_SKEW_S = 15 * 60
_STATUS_TYPES = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
                 408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
                 500: "InternalServerException", 503: "ServiceUnavailableException"}
_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_AUTH_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.coral.service/"
_MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS "
             "Secret Access Key and signing method. Consult the service documentation for details.")
_TOOL_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_encode = msgspec.json.encode


class AwsFailure(Exception):
    def __init__(self, status: int, error_type: str, message: str, namespace: str = _NAMESPACE) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.namespace = namespace


async def send_aws_error(send: Send, status: int, error_type: str, message: str, namespace: str = _NAMESPACE,
                         extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"x-amzn-ErrorType", f"{error_type}:{namespace}".encode()),
               (b"x-amzn-RequestId", str(uuid.uuid4()).encode())]
    if extra:
        headers.extend(extra)
    await respond_json(send, status, {"message": message}, headers)


# --- authentication -------------------------------------------------------------------------------------------

def authenticate(req: MockRequest) -> str:
    """The access key id of a correctly signed request; raises AwsFailure (403) otherwise."""
    headers = req.headers
    value = headers.get("authorization")
    if not value:
        raise AwsFailure(403, "MissingAuthenticationTokenException", "Missing Authentication Token", _AUTH_NAMESPACE)
    parsed = sigv4.parse(value)
    if parsed is None:
        raise AwsFailure(403, "IncompleteSignatureException",
                         f"Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' "
                         f"parameters. Authorization={value[:40]}", _AUTH_NAMESPACE)
    entry = CREDENTIALS.get(parsed.access_key_id)
    if entry is None:
        raise AwsFailure(403, "UnrecognizedClientException", "The security token included in the request is invalid.",
                         _AUTH_NAMESPACE)
    secret, token = entry
    if headers.get("x-amz-security-token") != token:
        raise AwsFailure(403, "UnrecognizedClientException", "The security token included in the request is invalid.",
                         _AUTH_NAMESPACE)
    if parsed.service != SERVICE:
        raise AwsFailure(403, "InvalidSignatureException",
                         f"Credential should be scoped to correct service: '{SERVICE}'. ", _AUTH_NAMESPACE)
    signed = set(parsed.signed_headers)
    required = {"host", "x-amz-date"} | ({"x-amz-security-token"} if token else set())
    if not required <= signed:
        missing = ", ".join(sorted(required - signed))
        raise AwsFailure(403, "InvalidSignatureException",
                         f"'{missing}' must be a signed header.", _AUTH_NAMESPACE)
    stamp = headers.get("x-amz-date", "")
    try:
        sent = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise AwsFailure(403, "IncompleteSignatureException", "Date must be in ISO-8601 'basic format'.",
                         _AUTH_NAMESPACE) from None
    if abs(time.time() - sent) > MAX_SKEW_S:
        raise AwsFailure(403, "InvalidSignatureException", f"Signature expired: {stamp} is now earlier or later than "
                         "the allowed 15 minute window.", _AUTH_NAMESPACE)
    content_sha = headers.get("x-amz-content-sha256")
    if content_sha is not None and content_sha != hashlib.sha256(req.body).hexdigest():
        raise AwsFailure(403, "InvalidSignatureException",
                         "The provided 'x-amz-content-sha256' header does not match what was computed.",
                         _AUTH_NAMESPACE)
    path = req.raw_path.decode("latin-1").split("?", 1)[0]
    if sigv4.is_signed_by(secret, parsed, req.method, path, req.query, headers, req.body):
        return parsed.access_key_id
    raise AwsFailure(403, "InvalidSignatureException", _MISMATCH, _AUTH_NAMESPACE)


# --- request validation ---------------------------------------------------------------------------------------

def _invalid(message: str) -> AwsFailure:
    return AwsFailure(400, "ValidationException", message)


def _check_block(block: Any, where: str) -> str | None:
    if not isinstance(block, dict) or len(block) != 1:
        raise _invalid(f"The content block at {where} must set exactly one member.")
    kind, value = next(iter(block.items()))
    if kind != "text" and not isinstance(value, dict):
        raise _invalid(f"The {kind} member at {where} must be an object.")
    if kind == "text":
        if not isinstance(value, str) or not value.strip():
            raise _invalid(f"The text field in the ContentBlock object at {where} is blank. Add text to the text "
                           "field, and try again.")
    elif kind == "image":
        if value.get("format") not in ("png", "jpeg", "gif", "webp") or not value.get("source", {}).get("bytes"):
            raise _invalid(f"The image at {where} needs a format and source.bytes.")
    elif kind == "toolUse":
        if not value.get("toolUseId") or not _TOOL_NAME.match(str(value.get("name", ""))) or "input" not in value:
            raise _invalid(f"The toolUse block at {where} needs toolUseId, a valid name and input.")
    elif kind == "toolResult":
        if not value.get("toolUseId") or not isinstance(value.get("content"), list):
            raise _invalid(f"The toolResult block at {where} needs toolUseId and content.")
    elif kind not in ("document", "guardContent", "reasoningContent", "cachePoint"):
        raise _invalid(f"Unknown content block member '{kind}' at {where}.")
    return kind


def validate(doc: Any) -> None:
    """Converse's request rules that an adapter can get wrong; raises AwsFailure (400 ValidationException)."""
    if not isinstance(doc, dict):
        raise _invalid("The request body must be a JSON object.")
    messages = doc.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("The messages field is required and must not be empty.")
    tool_blocks = False
    previous_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise _invalid(f"Value at 'messages.{i}.role' failed to satisfy constraint: Member must satisfy enum "
                           "value set: [user, assistant]")
        if (i == 0 and role != "user") or (i > 0 and role == messages[i - 1].get("role")):
            raise _invalid("A conversation must start with a user message and alternate between user and assistant "
                           "roles. Try again with a conversation that alternates.")
        content = message.get("content")
        if not isinstance(content, list) or not content:
            raise _invalid(f"The content field in the Message object at messages.{i} is empty.")
        tool_ids: set[str] = set()
        for j, block in enumerate(content):
            kind = _check_block(block, f"messages.{i}.content.{j}")
            if kind == "toolUse":
                tool_blocks = True
                tool_ids.add(block["toolUse"]["toolUseId"])
            elif kind == "toolResult":
                tool_blocks = True
                if block["toolResult"]["toolUseId"] not in previous_tool_ids:
                    raise _invalid(f"The toolResult at messages.{i}.content.{j} answers no toolUse of the previous "
                                   "turn.")
        previous_tool_ids = tool_ids
    for k, block in enumerate(doc.get("system") or ()):
        if not isinstance(block, dict) or not str(block.get("text", "")).strip():
            raise _invalid(f"The text field in the SystemContentBlock at system.{k} is blank.")
    config = doc.get("inferenceConfig") or {}
    for name in ("temperature", "topP"):
        value = config.get(name)
        if value is not None and not 0 <= value <= 1:
            raise _invalid(f"Value at 'inferenceConfig.{name}' failed to satisfy constraint: Member must have value "
                           "less than or equal to 1")
    if config.get("maxTokens") is not None and config["maxTokens"] < 1:
        raise _invalid("Value at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value "
                       "greater than or equal to 1")
    if len(config.get("stopSequences") or ()) > 4:
        raise _invalid("Value at 'inferenceConfig.stopSequences' must have length less than or equal to 4")
    tool_config = doc.get("toolConfig")
    if tool_blocks and not tool_config:
        raise _invalid("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
    if tool_config is not None:
        tools = tool_config.get("tools")
        if not isinstance(tools, list) or not tools:
            raise _invalid("Value at 'toolConfig.tools' failed to satisfy constraint: Member must have length "
                           "greater than or equal to 1")
        for k, tool in enumerate(tools):
            spec = tool.get("toolSpec") if isinstance(tool, dict) else None
            if not spec or not _TOOL_NAME.match(str(spec.get("name", ""))) or "json" not in (
                    spec.get("inputSchema") or {}):
                raise _invalid(f"The toolSpec at toolConfig.tools.{k} needs a valid name and inputSchema.json.")
        choice = tool_config.get("toolChoice")
        if choice is not None:
            if not isinstance(choice, dict) or len(choice) != 1 or next(iter(choice)) not in ("auto", "any", "tool"):
                raise _invalid("toolConfig.toolChoice must set exactly one of auto, any, tool.")
            if "tool" in choice:
                names = {t["toolSpec"]["name"] for t in tools}
                if (choice["tool"] or {}).get("name") not in names:
                    raise _invalid("The tool named in toolConfig.toolChoice.tool is not among toolConfig.tools.")


def _prompt_text(doc: dict) -> str:
    parts = [str(b.get("text", "")) for b in doc.get("system") or ()]
    for message in doc.get("messages") or ():
        for block in message.get("content") or ():
            if "text" in block:
                parts.append(block["text"])
    return " ".join(parts)


async def _accept(req: MockRequest, send: Send) -> dict | None:
    """The decoded, authenticated and valid body; None when an error was already answered."""
    try:
        authenticate(req)
        try:
            doc = msgspec.json.decode(req.body) if req.body else None
        except msgspec.DecodeError:
            raise _invalid("The request body is not valid JSON.") from None
        validate(doc)
    except AwsFailure as failure:
        await send_aws_error(send, failure.status, failure.error_type, failure.message, failure.namespace)
        return None
    return doc


# --- answers --------------------------------------------------------------------------------------------------

def _tool(req: MockRequest, doc: dict) -> tuple[str, str, bool] | None:
    """(name, input JSON text, forced) of the tool the answer calls, or None for a text answer."""
    config = doc.get("toolConfig") or {}
    specs = [t["toolSpec"] for t in config.get("tools") or ()]
    if not specs:
        return None
    choice = config.get("toolChoice") or {}
    if "tool" in choice:
        spec = next(s for s in specs if s["name"] == choice["tool"]["name"])
    elif "any" in choice or req.step.tool_call:
        spec = next((s for s in specs if s["name"] == req.step.tool_name), specs[0])
    else:
        return None
    text = json.dumps(sample((spec.get("inputSchema") or {}).get("json")))
    return spec["name"], text, "tool" in choice or "any" in choice


def _usage(doc: dict, reply: str) -> dict:
    p, c = count_tokens(_prompt_text(doc)), count_tokens(reply)
    return {"inputTokens": p, "outputTokens": c, "totalTokens": p + c}


async def converse(req: MockRequest, send: Send) -> None:
    doc = await _accept(req, send)
    if doc is None:
        return
    step = req.step
    reply = req.reply_text()
    content: list[dict] = [{"text": reply}]
    stop = "end_turn"
    call = _tool(req, doc)
    if call is not None:
        name, text, forced = call
        tool = {"toolUse": {"toolUseId": "tooluse_" + uuid.uuid4().hex[:22], "name": name,
                            "input": json.loads(text)}}
        content = [{"text": step.reply}, tool] if step.reply and not forced else [tool]
        stop = "tool_use"
    await respond_json(send, 200, {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": _usage(doc, reply),
        "metrics": {"latencyMs": 42},
    }, [(b"x-amzn-RequestId", str(uuid.uuid4()).encode())])


def _event(event_type: str, doc: dict, n: int) -> bytes:
    padded = {**doc, "p": _PADDING[: 1 + (n * 7) % len(_PADDING)]}
    return eventstream.event(event_type, _encode(padded))


def _member(error_type: str | None, default: str) -> str:
    name = error_type or default
    return name[:1].lower() + name[1:]


async def _frame(send: Send, frame: bytes, step: Any, n: int) -> None:
    """Send one frame in two writes cut at a varying point (readers must cope with any boundary)."""
    cut = 1 + (n * 13) % (len(frame) - 1)
    await stream_part(send, frame[:cut], step)
    await stream_part(send, frame[cut:])


async def converse_stream(req: MockRequest, send: Send) -> None:
    doc = await _accept(req, send)
    if doc is None:
        return
    step = req.step
    await start_stream(send, b"application/vnd.amazon.eventstream")
    if step.stream_error == "first":
        payload = _encode({"message": step.message or "Too many requests, please wait before trying again."})
        await end_stream(send, eventstream.exception(_member(step.error_type, "throttlingException"), payload))
        return
    frames: list[bytes] = [_event("messageStart", {"role": "assistant"}, 0)]
    call = _tool(req, doc)
    pieces = req.reply_words()
    index = 0
    if call is None or (step.reply and not call[2]):
        for piece in pieces:
            frames.append(_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}, len(frames)))
        frames.append(_event("contentBlockStop", {"contentBlockIndex": 0}, len(frames)))
        index = 1
    stop = "end_turn"
    if call is not None:
        name, text, _ = call
        frames.append(_event("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": {
            "toolUseId": "tooluse_" + uuid.uuid4().hex[:22], "name": name}}}, len(frames)))
        cut = max(1, text.find(":"))
        for part in (text[:cut], text[cut:]):
            frames.append(_event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {
                "input": part}}}, len(frames)))
        frames.append(_event("contentBlockStop", {"contentBlockIndex": index}, len(frames)))
        stop = "tool_use"
    frames.append(_event("messageStop", {"stopReason": stop}, len(frames)))
    frames.append(_event("metadata", {"usage": _usage(doc, req.reply_text()), "metrics": {"latencyMs": 42}},
                         len(frames)))
    half = len(frames) // 2
    for n, frame in enumerate(frames):
        if n == half and step.stream_error == "middle":
            payload = _encode({"message": step.message or "The model stream failed midway.",
                               "originalStatusCode": 500})
            await end_stream(send, eventstream.exception(
                _member(step.error_type, "modelStreamErrorException"), payload))
            return
        if n == half and step.stream_error == "cut":
            raise ConnectionResetError("mock cuts the stream")
        await _frame(send, frame, step, n)
    await end_stream(send)


async def error(req: MockRequest, send: Send) -> None:
    """A scripted failure in AWS's format, after the same authentication every request gets."""
    try:
        authenticate(req)
    except AwsFailure as failure:
        await send_aws_error(send, failure.status, failure.error_type, failure.message, failure.namespace)
        return
    step = req.step
    error_type = step.error_type or _STATUS_TYPES.get(step.status, "InternalServerException")
    await send_aws_error(send, step.status, error_type, step.message or f"mock {error_type} ({step.status})",
                         extra=retry_headers(step))


async def invoke(req: MockRequest, send: Send) -> None:
    """InvokeModel for anthropic models: the Messages body without ``model`` / ``stream`` and with
    ``anthropic_version: bedrock-2023-05-31``, answered as anthropic answers; streamed, each anthropic event is a
    ``chunk`` event carrying ``{"bytes": <base64 of the event JSON>}``."""
    try:
        authenticate(req)
    except AwsFailure as failure:
        await send_aws_error(send, failure.status, failure.error_type, failure.message, failure.namespace)
        return
    doc = msgspec.json.decode(req.body) if req.body else {}
    if doc.get("anthropic_version") != "bedrock-2023-05-31" or "model" in doc or "stream" in doc:
        await send_aws_error(send, 400, "ValidationException",
                             "anthropic_version: bedrock-2023-05-31 is required; model and stream are not accepted")
        return
    stream = req.match.group("action") == "invoke-with-response-stream"
    body = {k: v for k, v in doc.items() if k != "anthropic_version"}
    body.update(model=unquote(req.match.group("model")), stream=stream)
    inner = MockRequest(req.method, req.path, req.query, {**req.headers, "x-api-key": "bedrock",
                                                          "anthropic-version": "2023-06-01"},
                        _encode(body), req.step, req.state)
    framed: Send = _ChunkFramer(send) if stream else send
    await anthropic.messages(inner, framed)


class _ChunkFramer:
    """An ASGI ``send`` re-framing anthropic's SSE as InvokeModelWithResponseStream ``chunk`` events."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.pending = b""

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            await self.send({**message, "headers": [(b"content-type", b"application/vnd.amazon.eventstream")]})
            return
        self.pending += message.get("body", b"")
        frames = []
        while b"\n\n" in self.pending:
            block, self.pending = self.pending.split(b"\n\n", 1)
            data = b"".join(line[6:] for line in block.split(b"\n") if line.startswith(b"data: "))
            if data:
                frames.append(eventstream.event("chunk", _encode({"bytes": base64.b64encode(data).decode()})))
        await self.send({**message, "body": b"".join(frames)})


ROUTES = [
    ("POST", re.compile(r"^/model/(?P<model>[^/]+)/(?P<action>invoke|invoke-with-response-stream)$"), invoke),
    ("POST", re.compile(r"^/model/(?P<model>[^/]+)/converse$"), converse),
    ("POST", re.compile(r"^/model/(?P<model>[^/]+)/converse-stream$"), converse_stream),
]
