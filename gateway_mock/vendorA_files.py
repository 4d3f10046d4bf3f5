"""Mock of vendorA's files API: multipart upload, list (paged), retrieve, content and delete, kept in memory.

Like the real API: the upload needs a ``file`` part and a known ``purpose`` (400 naming it otherwise); ids look
like ``file-<24 alphanumerics>``; the list answers ``{object: "list", data, first_id, last_id, has_more}`` newest
first unless ``order=asc``, filtered by ``purpose``, paged by ``after`` and ``limit`` (1 to 10,000); an unknown id
is a 404 ``No such File object``. Batches and fine-tuning jobs read these files (``req.state.files`` /
``req.state.file_content``).
"""

from __future__ import annotations

import re
import secrets
import string
import time
from urllib.parse import parse_qs

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, MockState, respond, respond_json
from gateway_mock.multipart import FormError, parse_form

PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
_ALNUM = string.ascii_letters + string.digits


def new_id(prefix: str, length: int = 24) -> str:
    return prefix + "".join(secrets.choice(_ALNUM) for _ in range(length))


def invalid(message: str, param: str | None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def query(req: MockRequest) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(req.query, keep_blank_values=True).items()}


def page(items: list[dict], q: dict[str, str], default_limit: int, max_limit: int) -> tuple[list[dict], bool] | str:
    """Items after ``q["after"]``, up to ``limit``; a string is the message of a 400."""
    try:
        limit = int(q.get("limit") or default_limit)
    except ValueError:
        return "limit must be an integer"
    if not 1 <= limit <= max_limit:
        return f"limit must be between 1 and {max_limit}"
    start = 0
    after = q.get("after")
    if after:
        ids = [item["id"] for item in items]
        start = ids.index(after) + 1 if after in ids else len(items)
    return items[start:start + limit], start + limit < len(items)


def envelope(data: list[dict], has_more: bool) -> dict:
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


def store_file(state: MockState, content: bytes, filename: str, purpose: str) -> dict:
    file_id = new_id("file-")
    obj = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
           "filename": filename, "purpose": purpose, "status": "processed", "status_details": None,
           "expires_at": None}
    state.files[file_id] = obj
    state.file_content[file_id] = content
    return obj


async def create(req: MockRequest, send: Send) -> None:
    try:
        fields, filenames = parse_form(req.headers.get("content-type", ""), req.body)
    except FormError as exc:
        await respond_json(send, 400, invalid(f"Invalid multipart body: {exc}", "file"))
        return
    filename = filenames.get("file")
    purpose = fields.get("purpose", b"").decode()
    if "file" not in fields or filename is None:
        await respond_json(send, 400, invalid("Missing required parameter: 'file'.", "file"))
        return
    if purpose not in PURPOSES:
        await respond_json(send, 400, invalid(f"Invalid value for 'purpose': {purpose!r}.", "purpose"))
        return
    await respond_json(send, 200, store_file(req.state, fields["file"], filename, purpose))


async def listing(req: MockRequest, send: Send) -> None:
    q = query(req)
    files = sorted(req.state.files.values(), key=lambda f: (f["created_at"], f["id"]), reverse=q.get("order") != "asc")
    if q.get("purpose"):
        files = [f for f in files if f["purpose"] == q["purpose"]]
    result = page(files, q, 10_000, 10_000)
    if isinstance(result, str):
        await respond_json(send, 400, invalid(result, "limit"))
        return
    await respond_json(send, 200, envelope(*result))


async def _known(req: MockRequest, send: Send) -> str | None:
    file_id = req.match.group("file_id")
    if file_id not in req.state.files:
        await respond_json(send, 404, invalid(f"No such File object: {file_id}", "id"))
        return None
    return file_id


async def retrieve(req: MockRequest, send: Send) -> None:
    file_id = await _known(req, send)
    if file_id is not None:
        await respond_json(send, 200, req.state.files[file_id])


async def content(req: MockRequest, send: Send) -> None:
    file_id = await _known(req, send)
    if file_id is not None:
        await respond(send, 200, req.state.file_content[file_id], b"application/octet-stream")


async def delete(req: MockRequest, send: Send) -> None:
    file_id = await _known(req, send)
    if file_id is not None:
        req.state.files.pop(file_id)
        req.state.file_content.pop(file_id, None)
        await respond_json(send, 200, {"id": file_id, "object": "file", "deleted": True})


_ID = r"(?P<file_id>[^/]+)"
ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/files$"), create),
    ("GET", re.compile(r"^(?:/v1)?/files$"), listing),
    ("GET", re.compile(rf"^(?:/v1)?/files/{_ID}$"), retrieve),
    ("DELETE", re.compile(rf"^(?:/v1)?/files/{_ID}$"), delete),
    ("GET", re.compile(rf"^(?:/v1)?/files/{_ID}/content$"), content),
]
