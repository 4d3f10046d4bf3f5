"""Batch wire shapes: the create body (POST /v1/batches), the Batch object, its list envelope and line errors.

Facts relied on (the spec's Batch section and vendorA's batch reference): statuses ``validating``, ``failed``,
``in_progress``, ``finalizing``, ``completed``, ``expired``, ``cancelling``, ``cancelled``; Unix-second timestamps
per transition; ``errors`` is ``{"object": "list", "data": [{code, message, param, line}]}``; ``request_counts`` is
``{total, completed, failed}``; metadata holds at most 16 pairs, keys up to 64 and values up to 512 characters;
``usage`` sums the lines' token usage (input/output tokens with cached and reasoning details);
``output_expires_after`` (``{"anchor": "created_at", "seconds": 3600..2592000}``) is the expiry of the output and
error files the batch makes, counted from each file's creation (not the batch's); the Batch object does not echo it.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.schema.common import BodyDecoder, check_metadata
from gateway.schema.files import EXPIRES_MAX_S, EXPIRES_MIN_S

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
WINDOWS = ("24h", "immediate")
TERMINAL = frozenset({"failed", "completed", "expired", "cancelled"})


class OutputExpiresAfter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """When the batch's output and error files expire: ``seconds`` after each file is created."""

    anchor: Literal["created_at"]
    seconds: int


class CreateBatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    input_file_id: str
    completion_window: Literal["24h", "immediate"]
    endpoint: Literal["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]
    metadata: dict[str, Any] | None = None
    output_expires_after: OutputExpiresAfter | None = None


create_batch_decoder = BodyDecoder(CreateBatch)


def parse_create_batch(body: bytes) -> CreateBatch:
    """The create body with every field checked: 400 naming the first bad one."""
    request = create_batch_decoder.decode(body)
    if not request.input_file_id:
        raise InvalidRequest("input_file_id must not be empty", param="input_file_id")
    check_metadata(request.metadata)
    expiry = request.output_expires_after
    if expiry is not None and not EXPIRES_MIN_S <= expiry.seconds <= EXPIRES_MAX_S:
        raise InvalidRequest(f"output_expires_after.seconds must be between {EXPIRES_MIN_S} and {EXPIRES_MAX_S}, "
                             f"got {expiry.seconds}", param="output_expires_after.seconds")
    return request


class BatchError(msgspec.Struct, gc=False):
    code: str
    message: str
    param: str | None = None
    line: int | None = None


class BatchErrors(msgspec.Struct):
    object: str = "list"
    data: list[BatchError] = msgspec.field(default_factory=list)


class RequestCounts(msgspec.Struct, gc=False):
    total: int = 0
    completed: int = 0
    failed: int = 0


class InputTokensDetails(msgspec.Struct, gc=False):
    cached_tokens: int = 0


class OutputTokensDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int = 0


class BatchUsage(msgspec.Struct):
    input_tokens: int = 0
    input_tokens_details: InputTokensDetails = msgspec.field(default_factory=InputTokensDetails)
    output_tokens: int = 0
    output_tokens_details: OutputTokensDetails = msgspec.field(default_factory=OutputTokensDetails)
    total_tokens: int = 0


class Batch(msgspec.Struct, kw_only=True):
    """The Batch object as clients read it (every member present, null when unset)."""

    id: str
    object: str = "batch"
    endpoint: str
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: RequestCounts = msgspec.field(default_factory=RequestCounts)
    metadata: dict[str, str] | None = None
    usage: BatchUsage | None = None
