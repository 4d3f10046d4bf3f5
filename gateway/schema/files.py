"""File wire shapes: the File object, the deletion answer and the upload's form fields.

Facts relied on (vendorA's files reference): a File is ``{id, object: "file", bytes, created_at, filename,
purpose, status, status_details, expires_at}``; uploads are multipart/form-data with a ``file`` part and a
``purpose`` field (``assistants``, ``batch``, ``fine-tune``, ``vision``, ``user_data``, ``evals``), and optionally
``expires_after[anchor]`` (``created_at``) with ``expires_after[seconds]`` (3600 to 2592000); the list takes
``after``, ``limit`` (1 to 10,000, default 10,000), ``order`` (``asc``/``desc``, default ``desc``) and ``purpose``;
a deletion answers ``{id, object: "file", deleted: true}``.
"""

from __future__ import annotations

import msgspec

from gateway.http.errors import InvalidRequest

UPLOAD_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
#: the purpose of the files a gateway-run batch writes
BATCH_OUTPUT = "batch_output"
EXPIRES_MIN_S = 3600
EXPIRES_MAX_S = 2_592_000
LIST_LIMIT_MAX = 10_000


class FileObject(msgspec.Struct, kw_only=True):
    id: str
    object: str = "file"
    size: int = msgspec.field(name="bytes")
    created_at: int
    filename: str
    purpose: str
    status: str = "processed"
    status_details: str | None = None
    expires_at: int | None = None


class FileDeleted(msgspec.Struct):
    id: str
    object: str = "file"
    deleted: bool = True


def check_purpose(fields: dict[str, str]) -> str:
    purpose = fields.get("purpose")
    if purpose is None or purpose == "":
        raise InvalidRequest("purpose is required", param="purpose")
    if purpose not in UPLOAD_PURPOSES:
        raise InvalidRequest(f"purpose must be one of {', '.join(UPLOAD_PURPOSES)}, got {purpose!r}",
                             param="purpose")
    return purpose


def expires_after_s(fields: dict[str, str]) -> int | None:
    """The ``expires_after`` policy's seconds (None when absent); 400 naming the bad member."""
    anchor = fields.get("expires_after[anchor]")
    seconds = fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise InvalidRequest("expires_after[anchor] must be created_at", param="expires_after.anchor")
    try:
        value = int(seconds or "")
    except ValueError:
        raise InvalidRequest("expires_after[seconds] must be an integer", param="expires_after.seconds") from None
    if not EXPIRES_MIN_S <= value <= EXPIRES_MAX_S:
        raise InvalidRequest(f"expires_after[seconds] must be between {EXPIRES_MIN_S} and {EXPIRES_MAX_S}",
                             param="expires_after.seconds")
    return value
