"""The gateway's one error format: GatewayError subclasses and the vendorA error envelope they render to."""

from __future__ import annotations

import logging
import re
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()
_FIRST_WORD = re.compile(r"[A-Za-z]+")


def mid_sentence(text: str) -> str:
    """``text`` (a library's message) made to follow a colon inside a sentence: a capitalised first word is
    lowered (``Expected `int``` -> ``expected `int```); a word in capitals is kept (``JSON is malformed``,
    ``I/O error``)."""
    word = _FIRST_WORD.match(text)
    if word is None:
        return text
    letters = word.group()
    if letters[1:] and not letters[1:].islower():
        return text
    if len(letters) == 1 and text[1:2] not in ("", " "):
        return text
    return text[:1].lower() + text[1:]


class GatewayError(Exception):
    """An error the client sees: an HTTP status and the vendorA error envelope.

    ``extra`` holds top-level members placed beside ``error`` (for example ``provider``).
    """

    status: int = 500
    type: str = "api_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        type: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if type is not None:
            self.type = type
        self.extra = extra
        self.headers = headers

    def body(self) -> bytes:
        """The JSON bytes of the vendorA error envelope."""
        doc: dict[str, Any] = {
            "error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        }
        if self.extra:
            doc.update(self.extra)
        return _encoder.encode(doc)


class InvalidRequest(GatewayError):
    """400: the request (body, header or config) is not valid."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class Unauthorized(GatewayError):
    """401: missing or unknown gateway key."""

    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(GatewayError):
    """403: the key may not do this, or a custom host is blocked."""

    status = 403
    type = "permission_error"
    code = "forbidden"


class NotFound(GatewayError):
    """404: no such route or resource."""

    status = 404
    type = "not_found_error"
    code = "not_found"


class MethodNotAllowed(GatewayError):
    """405: the path exists but not with this method."""

    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class Conflict(GatewayError):
    """409: the record clashes with an existing one (a taken name or slug)."""

    status = 409
    type = "invalid_request_error"
    code = "conflict"


class RateLimited(GatewayError):
    """429: a rate-limit policy's window is full; ``Retry-After`` says when the window admits requests again."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class UsageLimitExceeded(GatewayError):
    """429: a usage-limit policy's budget is spent until its period resets (``Retry-After`` until then)."""

    status = 429
    type = "insufficient_quota"
    code = "usage_limit_exceeded"


class RequestTimeout(GatewayError):
    """408: the request's own request_timeout ran out."""

    status = 408
    type = "timeout_error"
    code = "request_timeout"


class PayloadTooLarge(GatewayError):
    """413: the body is larger than GATEWAY_MAX_BODY_BYTES."""

    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class UnsupportedMediaType(GatewayError):
    """415: the body comes in an encoding the gateway does not read."""

    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class ServiceUnavailable(GatewayError):
    """503: the gateway cannot answer this now (a store it needs is busy or unreachable); retrying shortly may work."""

    status = 503
    type = "api_error"
    code = "service_unavailable"


class UpstreamUnreachable(GatewayError):
    """502: the upstream could not be reached."""

    status = 502
    type = "upstream_error"
    code = "upstream_unreachable"


class BadUpstreamResponse(GatewayError):
    """502: the upstream answered something that is not its wire format."""

    status = 502
    type = "upstream_error"
    code = "bad_upstream_response"


class UpstreamTimeout(GatewayError):
    """504: an upstream connect or read timeout that no request_timeout governs."""

    status = 504
    type = "timeout_error"
    code = "upstream_timeout"


class UpstreamError(GatewayError):
    """An upstream's own error, relayed with its status and message."""

    type = "upstream_error"
    code = None


class GuardrailDenied(GatewayError):
    """446: a guardrail or hook that denies failed (or passed, with ``on_success.deny``).

    ``extra={"hook_results": ...}`` puts the ``hook_results`` object beside ``error``.
    """

    status = 446
    type = "hooks_failed"
    code = "guardrail_denied"


class CircuitOpen(GatewayError):
    """503: every target that could answer has its circuit breaker open."""

    status = 503
    type = "upstream_error"
    code = "circuit_open"


class RecordUnusable(GatewayError):
    """500: a stored control-plane record cannot be used (its secrets were sealed under another secret key)."""

    code = "record_unusable"


class ConfigError(InvalidRequest):
    """400: the config is not valid. ``param`` is the JSON path of the fault (``targets[1].retry.attempts``)."""

    @classmethod
    def at(cls, param: str, detail: str) -> ConfigError:
        """The error for the value at ``param``: message ``invalid config: <param>: <detail>``."""
        return cls(f"invalid config: {param}: {detail}", param=param)


def internal_error(exc: BaseException) -> GatewayError:
    """A bug surfaced as a 500 in the one error format; the traceback goes to the server log."""
    logging.getLogger("gateway").error("unexpected error while handling a request", exc_info=exc)
    return GatewayError("internal gateway error (the server log has the details)", code="internal_error")


class DialectError(GatewayError):
    """A gateway error whose body is written in another API's error shape (a front door's dialect, e.g. anthropic's
    ``{"type": "error", "error": {...}}``), with the status that API would use."""

    def __init__(self, error: GatewayError, status: int, body: bytes) -> None:
        super().__init__(error.message, param=error.param, code=error.code, status=status, type=error.type,
                         extra=error.extra, headers=error.headers)
        self._body = body

    def body(self) -> bytes:
        return self._body
