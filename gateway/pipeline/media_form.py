"""A multipart images or audio request received as it streams: form fields kept, file parts spooled to disk.

``/v1/images/edits`` and ``/variations`` carry ``image`` (possibly several, ``image[]``) and ``mask`` parts,
``/v1/audio/transcriptions`` and ``/translations`` a ``file`` part: every part with a filename is written, piece by
piece as it arrives, to an unnamed temporary file (never held whole in memory), the other parts are small text
fields. The files together may not exceed ``GATEWAY_FILE_MAX_BYTES`` (413 as soon as the Content-Length or the bytes
read say so), the same limit as ``/v1/files`` uploads (``gateway/jobs/uploads.py``, whose limits this reuses).

The fields become a JSON object (a repeated field an array), which the pipeline treats like a JSON body: param
overrides, guardrails and policies see it; each attempt sends a new multipart body made of those fields and the
spooled files, read from their start (``MediaForm.payload``), so retries and fallbacks resend the same files.
When the request's config caches answers, each file's BLAKE2b digest is computed as its bytes are written (in the
writing thread, off the event loop): the cache key covers the files without reading them again.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
import aiohttp.payload
import msgspec

from gateway.http.body import refuse_encoded
from gateway.http.bodywatch import BodyWatch, watch_of
from gateway.http.errors import InvalidRequest, PayloadTooLarge
from gateway.http.types import Receive, Scope
from gateway.jobs.multipart import PART_END, MultipartError, MultipartParser, PartStart, boundary_of
from gateway.jobs.uploads import ENVELOPE_BYTES, FIELD_MAX_BYTES, MAX_FIELDS, SpoolFile, header, multipart_events

MAX_FILES = 16
#: the size of each read of a spooled file while it is sent upstream
READ_BYTES = 256 * 1024
_encode = msgspec.json.encode


class SpooledPart(SpoolFile):
    """One file part: its field name, filename, content type, and the temporary file holding its bytes."""

    __slots__ = ("name", "filename", "content_type")

    def __init__(self, name: str, filename: str, content_type: str | None, directory: str | None,
                 hashed: bool = False) -> None:
        super().__init__(directory, hashed)
        self.name = name
        self.filename = filename
        self.content_type = content_type or "application/octet-stream"


class MediaForm:
    """The form fields (in order, repeats kept) and the spooled file parts of one request; ``close()`` deletes
    the files."""

    __slots__ = ("fields", "files")

    def __init__(self) -> None:
        self.fields: list[tuple[str, str]] = []
        self.files: list[SpooledPart] = []

    def body(self) -> bytes:
        """The fields as a JSON object (a field sent more than once, or named ``x[]``, is an array)."""
        doc: dict[str, Any] = {}
        for name, value in self.fields:
            key = name[:-2] if name.endswith("[]") else name
            if key in doc or name.endswith("[]"):
                old = doc.get(key)
                doc[key] = [*old, value] if isinstance(old, list) else ([old, value] if key in doc else [value])
            else:
                doc[key] = value
        return _encode(doc)

    def file_names(self) -> list[str]:
        return [part.name for part in self.files]

    def identity(self) -> list[list[Any]] | None:
        """What of the files changes an answer: each part's name, filename, content type, size and digest, in order
        (None when they were not hashed)."""
        digests = [part.digest() for part in self.files]
        if None in digests:
            return None
        return [[p.name, p.filename, p.content_type, p.size, d] for p, d in zip(self.files, digests)]

    def payload(self, doc: dict[str, Any]) -> aiohttp.MultipartWriter:
        """A multipart body of ``doc``'s fields (as the attempt sends them) and the spooled files, rewound."""
        form = aiohttp.FormData(quote_fields=False)
        for name, value in doc.items():
            if isinstance(value, list):
                for item in value:
                    form.add_field(f"{name}[]", _text(item))
            elif value is not None:
                form.add_field(name, _text(value))
        for part in self.files:
            form.add_field(part.name, SpoolPayload(part), filename=part.filename, content_type=part.content_type)
        writer = form()
        assert isinstance(writer, aiohttp.MultipartWriter)
        return writer

    def close(self) -> None:
        for part in self.files:
            part.file.close()


class SpoolPayload(aiohttp.payload.Payload):
    """A spooled file part as an upload body part, read from the file's start at every write (positioned reads
    off the event loop), so a retry, a fallback target or a resend after a stale connection gets the whole file."""

    def __init__(self, part: SpooledPart) -> None:
        super().__init__(part, content_type=part.content_type, filename=part.filename)
        self._size = part.size
        self._fd = part.file.fileno()

    async def write(self, writer: Any) -> None:
        offset = 0
        while True:
            chunk = await asyncio.to_thread(os.pread, self._fd, READ_BYTES, offset)
            if not chunk:
                return
            offset += len(chunk)
            await writer.write(chunk)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise TypeError("an uploaded file is not decoded as text")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return _encode(value).decode()


async def receive_form(scope: Scope, receive: Receive, max_file_bytes: int, spool_dir: str | None,
                       hashed: bool = False) -> MediaForm:
    """Read the whole multipart body as it streams (400 for a malformed one, 413 when its files are too large);
    ``hashed``: digest each file as it is written."""
    refuse_encoded(header(scope, b"content-encoding"), "multipart forms")
    try:
        boundary = boundary_of(header(scope, b"content-type") or "")
    except MultipartError as exc:
        raise InvalidRequest(f"{exc}: send this request as multipart/form-data", param="content-type") from None
    declared = header(scope, b"content-length")
    if declared and declared.isdigit() and int(declared) > max_file_bytes + ENVELOPE_BYTES:
        raise PayloadTooLarge(f"a body of {declared} bytes exceeds the file limit of {max_file_bytes} bytes")
    form = MediaForm()
    try:
        await _read(receive, MultipartParser(boundary), form, max_file_bytes, spool_dir, hashed, watch_of(scope))
        for part in form.files:
            await part.flush()
            await asyncio.to_thread(part.file.flush)
    except BaseException:
        form.close()
        raise
    return form


async def _read(receive: Receive, parser: MultipartParser, form: MediaForm, limit: int, spool_dir: str | None,
                hashed: bool, watch: BodyWatch | None) -> None:
    spooled: SpooledPart | None = None
    field: str | None = None
    value = bytearray()
    total = 0
    async for event in multipart_events(receive, parser, None, watch=watch):
        if isinstance(event, bytes):
            if spooled is not None:
                total += len(event)
                if total > limit:
                    raise PayloadTooLarge(f"the uploaded files exceed the limit of {limit} bytes")
                await spooled.write(event)
            elif field is not None:
                value += event
                if len(value) > FIELD_MAX_BYTES:
                    raise InvalidRequest(f"form field {field} is too large", param=field)
        elif isinstance(event, PartStart):
            spooled, field = _start(event, form, spool_dir, hashed)
            value.clear()
        elif event is PART_END:
            if field is not None:
                form.fields.append((field, value.decode("utf-8", "replace")))
            spooled = field = None


def _start(part: PartStart, form: MediaForm, spool_dir: str | None, hashed: bool
           ) -> tuple[SpooledPart | None, str | None]:
    if part.filename is not None:
        if len(form.files) >= MAX_FILES:
            raise InvalidRequest(f"at most {MAX_FILES} files may be sent at a time", param=part.name)
        spooled = SpooledPart(part.name, part.filename or part.name, part.content_type, spool_dir, hashed)
        form.files.append(spooled)
        return spooled, None
    if len(form.fields) >= MAX_FIELDS:
        raise InvalidRequest("too many form fields", param=part.name)
    return None, part.name
