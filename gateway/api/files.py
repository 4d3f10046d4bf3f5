"""``/v1/files``: uploads stored by the gateway (for batches it runs) or forwarded to the provider a request names.

- ``POST /v1/files`` with provider identification (``x-gateway-provider``, a slug or a config) is forwarded to that
  provider: the multipart body is spooled to a temporary file as it arrives (never held in memory), its fields are
  checked, then the same body is sent on. Without one, the gateway stores the file (purpose ``batch`` only) and
  answers a File whose id starts with ``file-gw-``.
- ``GET /v1/files/{id}``, ``/content`` and ``DELETE`` reach the gateway's store for a ``file-gw-`` id whatever
  headers they carry, and the named provider otherwise. The input file of an unfinished batch cannot be deleted
  (409).
- ``GET /v1/files`` lists the provider's files when the request names one, else the workspace's gateway files
  (``purpose``, ``order``, ``after``, ``limit`` 1 to 10,000, default 10,000; another query name is a 400).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api.admin import choice_query, int_query, send_record
from gateway.api.jobs import Jobs, cursor_page, list_envelope, raw_query
from gateway.http.errors import Conflict, InvalidRequest, NotFound
from gateway.http.respond import end_stream, gateway_headers, send_chunk, send_json
from gateway.http.types import Receive, Scope, Send
from gateway.jobs.files import is_gateway_file, new_file_id
from gateway.jobs.filestore import FileMissing
from gateway.jobs.passthrough import names_provider, path_id
from gateway.jobs.uploads import header, receive_upload
from gateway.providers.base import FILES
from gateway.schema.files import LIST_LIMIT_MAX, FileDeleted, FileObject, check_purpose, expires_after_s

#: the query of GET /v1/files (what the openai SDK sends, and the workspace for the root key)
LIST_QUERY = ("after", "limit", "order", "purpose", "workspace_id")

_encode = msgspec.json.encode


def _file_id(scope: Scope) -> str:
    return path_id(scope["path_params"]["file_id"], "file_id", "file")


def _not_found(file_id: str) -> NotFound:
    return NotFound(f"no file with id '{file_id}' (files stored at a provider need that provider's headers)",
                    param="file_id")


class FileRoutes:
    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("POST", "/v1/files", self.create),
            ("GET", "/v1/files", self.list),
            ("GET", "/v1/files/{file_id}", self.retrieve),
            ("DELETE", "/v1/files/{file_id}", self.delete),
            ("GET", "/v1/files/{file_id}/content", self.content),
        ]

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        ctx = caller.ctx
        limit = jobs.settings.file_max_bytes
        if names_provider(ctx):
            target = await jobs.forwarder.target(ctx, FILES)
            upload = await receive_upload(scope, receive, limit, None, jobs.spool_dir, spool=True)
            assert upload.spool is not None  # spool=True: the file part is spooled
            try:
                check_purpose(upload.fields)
                expires_after_s(upload.fields)
                await jobs.forwarder.relay_json(send, ctx, FILES, "POST", "/files", body=upload.spool,
                                                content_type=header(scope, b"content-type"), target=target)
            finally:
                upload.spool.close()
            return
        file_id = new_file_id()
        writer = jobs.files.writer(file_id)
        try:
            upload = await receive_upload(scope, receive, limit, writer)
            purpose = check_purpose(upload.fields)
            if purpose != "batch":
                raise InvalidRequest(
                    f"the gateway stores files for the batches it runs (purpose batch); upload {purpose} files to "
                    "a provider (send its provider headers)", param="purpose")
            expires = expires_after_s(upload.fields)
            size = await writer.commit()
        except BaseException:
            await writer.abort()
            raise
        try:
            obj = await jobs.files.add(caller.workspace, file_id, upload.filename or "file", purpose, size, expires)
        except BaseException:
            await jobs.files.blobs.delete(file_id)
            raise
        await send_json(send, 200, _encode(obj), gateway_headers(ctx.trace_id))

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope, LIST_QUERY)
        query = caller.query
        limit = int_query(query, "limit", LIST_LIMIT_MAX, 1, LIST_LIMIT_MAX)
        order = choice_query(query, "order", ("asc", "desc")) or "desc"
        if names_provider(caller.ctx):
            await jobs.forwarder.relay_json(send, caller.ctx, FILES, "GET", "/files", raw_query(scope))
            return
        files = await jobs.files.list(caller.workspace, query.get("purpose") or None)
        if order == "desc":
            files.reverse()
        page, has_more = cursor_page(files, _id, query.get("after") or None, limit)
        await send_json(send, 200, _encode(list_envelope(page, _id, has_more)), gateway_headers(caller.ctx.trace_id))

    async def retrieve(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        file_id = _file_id(scope)
        if is_gateway_file(file_id):
            await send_record(send, await jobs.files.get(caller.workspace, file_id))
        elif names_provider(caller.ctx):
            await jobs.forwarder.relay_json(send, caller.ctx, FILES, "GET", f"/files/{file_id}")
        else:
            raise _not_found(file_id)

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        file_id = _file_id(scope)
        if is_gateway_file(file_id):
            await jobs.files.get(caller.workspace, file_id)
            batch_id = await jobs.batches.reading(caller.workspace, file_id)
            if batch_id is not None:
                raise Conflict(f"file '{file_id}' is the input of batch '{batch_id}', which has not ended: cancel it "
                               "or wait for it first", param="file_id")
            await jobs.files.delete(caller.workspace, file_id)
            await send_record(send, FileDeleted(file_id))
        elif names_provider(caller.ctx):
            await jobs.forwarder.relay_json(send, caller.ctx, FILES, "DELETE", f"/files/{file_id}")
        else:
            raise _not_found(file_id)

    async def content(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        file_id = _file_id(scope)
        if not is_gateway_file(file_id):
            if not names_provider(caller.ctx):
                raise _not_found(file_id)
            await jobs.forwarder.relay_bytes(send, caller.ctx, FILES, f"/files/{file_id}/content")
            return
        _, pieces = await jobs.files.content(caller.workspace, file_id)
        iterator = pieces.__aiter__()
        try:
            first = await iterator.__anext__()
        except StopAsyncIteration:
            first = b""
        except FileMissing:
            raise _not_found(file_id) from None
        headers = [(b"content-type", b"application/octet-stream"), *gateway_headers(caller.ctx.trace_id)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if first:
            await send_chunk(send, first)
        try:
            async for piece in iterator:
                await send_chunk(send, piece)
        except FileMissing:
            pass  # deleted while being read: the body ends short
        await end_stream(send)


def _id(obj: FileObject) -> str:
    return obj.id
