"""Gateway-stored files: File records in the state store (per workspace) and their bytes in a FileStore.

Ids are ``file-gw-<32 hex>``, so a request for one reaches the gateway's store whatever provider headers it
carries. A record is written only after its bytes are committed, so a listed file is always readable; a file whose
``expires_at`` has passed reads as missing (404) and its bytes are removed on that first miss.
"""

from __future__ import annotations

import time
import uuid
from typing import AsyncIterator

from gateway.controlplane.records import Entity, Repository
from gateway.http.errors import NotFound
from gateway.jobs.filestore import FileMissing, FileStore, FileWriter
from gateway.schema.files import FileObject
from gateway.state.base import StateStore

PREFIX = "file-gw-"
KIND = "file"


def is_gateway_file(file_id: str) -> bool:
    return file_id.startswith(PREFIX)


def new_file_id() -> str:
    return f"{PREFIX}{uuid.uuid4().hex}"


class StoredFile(Entity, kw_only=True):
    """The record of one gateway-stored file: its public File object."""

    file: FileObject


class GatewayFiles:
    """Create, read, list and delete gateway-stored files of a workspace."""

    def __init__(self, store: StateStore, blobs: FileStore) -> None:
        self.blobs = blobs
        self.repo = Repository(store, KIND, StoredFile, PREFIX, "file", id_param="file_id")

    def writer(self, file_id: str) -> FileWriter:
        return self.blobs.writer(file_id)

    async def add(self, workspace: str, file_id: str, filename: str, purpose: str, size: int,
                  expires_after_s: int | None = None) -> FileObject:
        """Record a file whose bytes were committed under ``file_id``."""
        now = int(time.time())
        obj = FileObject(id=file_id, size=size, created_at=now, filename=filename, purpose=purpose,
                         expires_at=now + expires_after_s if expires_after_s else None)
        await self.repo.create(StoredFile(id=file_id, workspace_id=workspace, file=obj))
        return obj

    async def get(self, workspace: str, file_id: str) -> FileObject:
        """The file of ``workspace``; 404 naming ``file_id`` when missing, elsewhere or expired."""
        if not is_gateway_file(file_id):
            raise NotFound(f"no file with id '{file_id}'", param="file_id")
        record = await self.repo.get(workspace, file_id)
        if _expired(record.file):
            await self._drop(workspace, file_id)
            raise NotFound(f"no file with id '{file_id}' (it expired)", param="file_id")
        return record.file

    async def list(self, workspace: str, purpose: str | None = None) -> list[FileObject]:
        """The workspace's live files, oldest first."""
        files = [r.file for r in await self.repo.list(workspace)]
        return [f for f in files if not _expired(f) and (purpose is None or f.purpose == purpose)]

    async def delete(self, workspace: str, file_id: str) -> None:
        await self.get(workspace, file_id)
        await self._drop(workspace, file_id)

    async def _drop(self, workspace: str, file_id: str) -> None:
        await self.repo.delete(workspace, file_id)
        await self.blobs.delete(file_id)

    async def content(self, workspace: str, file_id: str) -> tuple[FileObject, AsyncIterator[bytes]]:
        """The file and an iterator over its bytes (404 as ``get``)."""
        obj = await self.get(workspace, file_id)
        return obj, self.blobs.read(file_id)

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        """The bytes of a file by id, for the batch runner (FileMissing when gone)."""
        async for piece in self.blobs.read(file_id):
            yield piece


def _expired(obj: FileObject) -> bool:
    return obj.expires_at is not None and obj.expires_at <= time.time()


__all__ = ["FileMissing", "GatewayFiles", "StoredFile", "is_gateway_file", "new_file_id", "PREFIX"]
