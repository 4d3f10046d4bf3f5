"""The lines of a batch's output and error files, and what the runner reads from each line's answer.

Facts relied on (vendorA's batch output format): each line is ``{"id": "batch_req_...", "custom_id": ...,
"response": {"status_code", "request_id", "body"} | null, "error": {"code", "message"} | null}``; an answer with
an HTTP status (2xx or not) fills ``response`` (a non-2xx one goes to the error file), a failure without one
(a line that was invalid, or never ran before the batch was cancelled or expired) fills ``error``.

A stored result is the output line prefixed with one byte saying which file it belongs to: ``o`` (output) or
``e`` (error).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.process_ids import IdSource
from gateway.schema.batches import BatchError, BatchUsage

OUTPUT = b"o"
ERROR = b"e"
_encode = msgspec.json.encode
_decode_any = msgspec.json.Decoder()


def _single_line_json(body: bytes) -> bytes:
    """The answer as one line of JSON (re-encoded compactly if it spans lines or is not JSON at all)."""
    if body and b"\n" not in body and b"\r" not in body:
        return body
    try:
        return _encode(_decode_any.decode(body))
    except msgspec.DecodeError:
        return _encode(body.decode("utf-8", "replace"))


class ResultLines:
    """Makes a batch's stored results; owns the ``batch_req_`` ids they carry: a random prefix made with the object
    and a counter, unique without a syscall per line (each runner makes its own, after any fork)."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids = IdSource()

    def _request_id(self) -> bytes:
        """``batch_req_`` + 32 hex."""
        return f"batch_req_{self._ids.next_hex()}".encode()

    def response(self, custom_id: str, request_id: str, status: int, body: bytes) -> bytes:
        """The stored result of a line that got an HTTP answer."""
        kind = OUTPUT if 200 <= status < 300 else ERROR
        return b"".join((
            kind, b'{"id":"', self._request_id(), b'","custom_id":', _encode(custom_id),
            b',"response":{"status_code":', str(status).encode(), b',"request_id":', _encode(request_id),
            b',"body":', _single_line_json(body), b'},"error":null}',
        ))

    def error(self, custom_id: str | None, code: str, message: str) -> bytes:
        """The stored result of a line that failed without an HTTP answer."""
        return ERROR + _encode({"id": self._request_id().decode(), "custom_id": custom_id, "response": None,
                                "error": {"code": code, "message": message}})

    def invalid(self, custom_id: str | None, error: BatchError) -> bytes:
        return self.error(custom_id, error.code, error.message)


class _Details(msgspec.Struct, gc=False):
    cached_tokens: int = 0
    reasoning_tokens: int = 0


class LineUsage(msgspec.Struct, gc=False):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _Details | None = None


class _WithUsage(msgspec.Struct, gc=False):
    usage: LineUsage | None = None


class _ResultUsage(msgspec.Struct, gc=False):
    response: _ResponseBody | None = None


class _ResponseBody(msgspec.Struct, gc=False):
    body: _WithUsage | None = None


_usage_decoder = msgspec.json.Decoder(_WithUsage)
_result_usage_decoder = msgspec.json.Decoder(_ResultUsage)


def add_usage(total: BatchUsage, usage: LineUsage | None) -> None:
    if usage is None:
        return
    total.input_tokens += usage.prompt_tokens
    total.output_tokens += usage.completion_tokens
    total.total_tokens += usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
    if usage.prompt_tokens_details is not None:
        total.input_tokens_details.cached_tokens += usage.prompt_tokens_details.cached_tokens
    if usage.completion_tokens_details is not None:
        total.output_tokens_details.reasoning_tokens += usage.completion_tokens_details.reasoning_tokens


def answer_usage(body: bytes) -> LineUsage | None:
    """The ``usage`` member of a 2xx answer (None when absent or unreadable)."""
    try:
        return _usage_decoder.decode(body).usage
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def result_usage(result: bytes) -> LineUsage | None:
    """The usage inside a stored output result (for recounting after a restart)."""
    try:
        response = _result_usage_decoder.decode(result[1:]).response
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return response.body.usage if response is not None and response.body is not None else None


class _LimitEnvelope(msgspec.Struct, gc=False):
    error: Any = None
    provider: str | None = None


_limit_decoder = msgspec.json.Decoder(_LimitEnvelope)


def gateway_limit(body: bytes) -> str | None:
    """For a 429: the error ``code`` when the gateway itself answered it (a rate or usage limit; "" without a
    code), None when it was relayed from a provider: the gateway's relayed provider errors always name the provider
    beside ``error``."""
    try:
        envelope = _limit_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if envelope.provider is not None:
        return None
    code = envelope.error.get("code") if isinstance(envelope.error, dict) else None
    return code if isinstance(code, str) else ""


def retry_after_s(headers: list[tuple[bytes, bytes]]) -> float | None:
    """Seconds asked by ``retry-after-ms`` or ``retry-after`` (delta seconds), None when absent or unreadable."""
    found: dict[bytes, bytes] = {k.lower(): v for k, v in headers if k.lower() in (b"retry-after", b"retry-after-ms")}
    for name, scale in ((b"retry-after-ms", 0.001), (b"retry-after", 1.0)):
        raw = found.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if value >= 0:
            return value * scale
    return None
