"""Receiving a file upload from ASGI: multipart parsed as it streams, the file's bytes handed on piece by piece.

The ``file`` part goes to a ``FileWriter`` (a gateway-stored file) or nowhere; with ``spool`` the raw body is
also copied to an unnamed temporary file (to forward it to a provider once the fields are known to be valid).
Neither the body nor the file is ever held whole in memory. A file larger than ``GATEWAY_FILE_MAX_BYTES`` is a
413 as soon as it is known (Content-Length or bytes read); the form fields beside it are small (each at most
``FIELD_MAX_BYTES``, at most ``MAX_FIELDS`` of them).
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from typing import IO, AsyncIterator

from gateway.http.body import ClientDisconnected, refuse_encoded
from gateway.http.bodywatch import BodyWatch, watch_of, watched_receive
from gateway.http.errors import InvalidRequest, PayloadTooLarge
from gateway.http.types import Receive, Scope
from gateway.jobs.filestore import FileWriter
from gateway.jobs.multipart import PART_END, MultipartError, MultipartParser, PartStart, boundary_of

FIELD_MAX_BYTES = 64 * 1024
MAX_FIELDS = 32
#: multipart framing and form fields allowed beyond the file's own bytes
ENVELOPE_BYTES = 1024 * 1024
SPOOL_FLUSH_BYTES = 1024 * 1024


class Upload:
    """What an upload carried: the form fields, the file's name and size (and the raw body, when spooled)."""

    __slots__ = ("fields", "filename", "size", "spool")

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.filename: str | None = None
        self.size = 0
        #: the raw body, rewound (a binary file the caller closes), when asked for
        self.spool: IO[bytes] | None = None


class SpoolFile:
    """An unnamed temporary file written in large pieces off the event loop; with ``hashed``, a BLAKE2b digest of
    its bytes is computed as they are written (in the writing thread), so nothing reads the file again for it."""

    __slots__ = ("file", "size", "pending", "pending_size", "hasher")

    def __init__(self, directory: str | None, hashed: bool = False) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(dir=directory)
        #: the bytes written so far
        self.size = 0
        self.pending: list[bytes] = []
        self.pending_size = 0
        self.hasher = hashlib.blake2b(digest_size=20) if hashed else None

    async def write(self, data: bytes) -> None:
        self.pending.append(data)
        self.size += len(data)
        self.pending_size += len(data)
        if self.pending_size >= SPOOL_FLUSH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        if self.pending:
            data = b"".join(self.pending)
            self.pending.clear()
            self.pending_size = 0
            await asyncio.to_thread(self._write, data)

    def _write(self, data: bytes) -> None:
        if self.hasher is not None:
            self.hasher.update(data)  # releases the GIL on large pieces
        self.file.write(data)

    def digest(self) -> str | None:
        """The hex digest of the whole file (after ``flush``), None when it was not hashed."""
        return self.hasher.hexdigest() if self.hasher is not None else None

    async def rewound(self) -> IO[bytes]:
        await self.flush()
        await asyncio.to_thread(self.file.flush)
        self.file.seek(0)
        return self.file


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def receive_upload(scope: Scope, receive: Receive, max_file_bytes: int, sink: FileWriter | None,
                         spool_dir: str | None = None, spool: bool = False) -> Upload:
    """Read the whole multipart upload (streaming); 400 for a malformed body or no ``file`` part, 413 when too
    large. The caller commits or aborts ``sink``; on an exception here nothing was committed."""
    refuse_encoded(header(scope, b"content-encoding"), "multipart uploads")
    content_type = header(scope, b"content-type") or ""
    try:
        boundary = boundary_of(content_type)
    except MultipartError as exc:
        raise InvalidRequest(f"{exc}: send the file as multipart/form-data", param="content-type") from None
    declared = header(scope, b"content-length")
    if declared and declared.isdigit() and int(declared) > max_file_bytes + ENVELOPE_BYTES:
        raise PayloadTooLarge(f"upload of {declared} bytes exceeds the file limit of {max_file_bytes} bytes")
    upload = Upload()
    raw = SpoolFile(spool_dir) if spool else None
    try:
        await _read_parts(receive, MultipartParser(boundary), upload, sink, raw, max_file_bytes, watch_of(scope))
        if raw is not None:
            upload.spool = await raw.rewound()
    except BaseException:
        if raw is not None:
            raw.file.close()
        raise
    if upload.filename is None:
        raise InvalidRequest("file is required (a multipart part named 'file' with a filename)", param="file")
    return upload


async def multipart_events(receive: Receive, parser: MultipartParser, param: str | None,
                           raw: SpoolFile | None = None, watch: BodyWatch | None = None
                           ) -> AsyncIterator[bytes | PartStart | object]:
    """The events of a multipart body as it is received (each raw chunk also written to ``raw`` when given): a
    client gone is ``ClientDisconnected``, a malformed body a 400 (``param`` names the field it concerns), a body
    still arriving past the worker's body timeout (``watch``) a 408."""
    more = True
    began = watch.tick if watch is not None else 0
    while more:
        message = await watched_receive(watch, receive, began)
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        if raw is not None and chunk:
            await raw.write(chunk)
        try:
            events = parser.feed(chunk) if chunk else []
        except MultipartError as exc:
            raise InvalidRequest(f"malformed multipart body: {exc}", param=exc.param or param) from None
        for event in events:
            yield event
    try:
        parser.close()
    except MultipartError as exc:
        raise InvalidRequest(f"malformed multipart body: {exc}", param=param) from None


async def _read_parts(receive: Receive, parser: MultipartParser, upload: Upload, sink: FileWriter | None,
                      raw: SpoolFile | None, max_file_bytes: int, watch: BodyWatch | None) -> None:
    current: str | None = None  # "file", a field name, or None between parts
    field = bytearray()
    async for event in multipart_events(receive, parser, "file", raw, watch):
        if isinstance(event, bytes):
            if current == "file":
                upload.size += len(event)
                if upload.size > max_file_bytes:
                    raise PayloadTooLarge(f"the file exceeds the limit of {max_file_bytes} bytes")
                if sink is not None:
                    await sink.write(event)
            elif current is not None:
                field += event
                if len(field) > FIELD_MAX_BYTES:
                    raise InvalidRequest(f"form field {current} is too large", param=current)
        elif isinstance(event, PartStart):
            current = _start_part(event, upload)
            field.clear()
        elif event is PART_END:
            if current not in (None, "file"):
                upload.fields[current] = field.decode("utf-8", "replace")
            current = None


def _start_part(part: PartStart, upload: Upload) -> str:
    if part.name == "file":
        if upload.filename is not None:
            raise InvalidRequest("only one file may be uploaded at a time", param="file")
        upload.filename = part.filename or "file"
        return "file"
    if len(upload.fields) >= MAX_FIELDS:
        raise InvalidRequest("too many form fields", param=part.name)
    return part.name
