"""Where the bytes of gateway-stored files live: a directory, or chunks in the state store (Redis) for every
instance to read.

- ``DirectoryFileStore``: one file per id under a directory: ``<data dir>/files`` on the embedded default, or
  ``GATEWAY_FILES_DIR`` (a directory every instance mounts, when several instances share Redis). A file being
  written is a hidden ``.part`` file renamed into place on commit, so a reader never sees half a file.
- ``StateFileStore``: with ``GATEWAY_REDIS_URL`` and no ``GATEWAY_FILES_DIR``, files are cut into chunks of
  ``CHUNK_BYTES`` stored as KV values of the state store (``filechunk:<id>:<n>``) and a head key (``file:<id>``,
  the chunk count) written last, so any instance reads a file any instance stored. Their size counts against
  Redis memory; ``GATEWAY_FILE_MAX_BYTES`` bounds each file.

Both stream: a writer takes pieces as an upload arrives and a reader yields pieces, so no file is ever held whole
in memory. Blocking disk calls run off the event loop.
"""

from __future__ import annotations

import abc
import asyncio
import os
import secrets
from pathlib import Path
from typing import AsyncIterator, BinaryIO

from gateway.settings import Settings, data_path
from gateway.state.base import StateStore

CHUNK_BYTES = 1024 * 1024
READ_BYTES = 256 * 1024


class FileMissing(Exception):
    """No stored bytes under this id."""


class FileWriter(abc.ABC):
    """Accepts a file's bytes in pieces; ``commit`` makes them readable under the id, ``abort`` drops them."""

    @abc.abstractmethod
    async def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    async def commit(self) -> int:
        """Make the file readable; returns its size in bytes."""

    @abc.abstractmethod
    async def abort(self) -> None: ...


class FileStore(abc.ABC):
    #: which store this is: directory or state (tests and debugging read it; no log or doc shows it)
    kind: str = "abstract"

    @abc.abstractmethod
    def writer(self, file_id: str) -> FileWriter:
        """A writer for ``file_id`` (replacing any file of that id on commit)."""

    @abc.abstractmethod
    def read(self, file_id: str) -> AsyncIterator[bytes]:
        """The file's bytes in pieces; FileMissing (at the first iteration) when there is no such file."""

    @abc.abstractmethod
    async def delete(self, file_id: str) -> None:
        """Remove the file (no error when missing)."""


class _DirectoryWriter(FileWriter):
    def __init__(self, final: Path) -> None:
        self.final = final
        self.part = final.with_name(f".{final.name}.{secrets.token_hex(4)}.part")
        self.handle: BinaryIO | None = None
        self.size = 0
        self.pending: list[bytes] = []
        self.pending_size = 0

    def _open_and_write(self, data: bytes) -> None:
        handle = self.handle
        if handle is None:
            handle = self.handle = open(self.part, "wb")  # kept open across writes, closed in _finish
        handle.write(data)

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        self.pending.append(data)
        self.pending_size += len(data)
        if self.pending_size >= CHUNK_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        data = b"".join(self.pending)
        self.pending.clear()
        self.pending_size = 0
        await asyncio.to_thread(self._open_and_write, data)

    def _finish(self) -> None:
        handle = self.handle
        if handle is None:
            handle = self.handle = open(self.part, "wb")  # an empty file: opened to be closed
        handle.close()
        os.replace(self.part, self.final)

    async def commit(self) -> int:
        await self._flush()
        await asyncio.to_thread(self._finish)
        return self.size

    def _drop(self) -> None:
        if self.handle is not None:
            self.handle.close()
        try:
            os.unlink(self.part)
        except FileNotFoundError:
            pass

    async def abort(self) -> None:
        self.pending.clear()
        await asyncio.to_thread(self._drop)


class DirectoryFileStore(FileStore):
    kind = "directory"

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, file_id: str) -> Path:
        if not file_id or "/" in file_id or file_id.startswith("."):
            raise FileMissing(file_id)
        return self.directory / file_id

    def writer(self, file_id: str) -> FileWriter:
        return _DirectoryWriter(self._path(file_id))

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        path = self._path(file_id)
        try:
            handle = await asyncio.to_thread(open, path, "rb")
        except FileNotFoundError:
            raise FileMissing(file_id) from None
        try:
            while True:
                data = await asyncio.to_thread(handle.read, READ_BYTES)
                if not data:
                    return
                yield data
        finally:
            handle.close()

    async def delete(self, file_id: str) -> None:
        try:
            await asyncio.to_thread(os.unlink, self._path(file_id))
        except (FileNotFoundError, FileMissing):
            pass


def _head_key(file_id: str) -> str:
    return f"file:{file_id}"


def _chunk_key(file_id: str, n: int) -> str:
    return f"filechunk:{file_id}:{n}"


class _StateWriter(FileWriter):
    def __init__(self, store: StateStore, file_id: str) -> None:
        self.store = store
        self.file_id = file_id
        self.buffer = bytearray()
        self.chunks = 0
        self.size = 0

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        self.buffer += data
        while len(self.buffer) >= CHUNK_BYTES:
            await self._put(bytes(self.buffer[:CHUNK_BYTES]))
            del self.buffer[:CHUNK_BYTES]

    async def _put(self, data: bytes) -> None:
        await self.store.set(_chunk_key(self.file_id, self.chunks), data)
        self.chunks += 1

    async def commit(self) -> int:
        if self.buffer:
            await self._put(bytes(self.buffer))
            self.buffer.clear()
        old = await self.store.get(_head_key(self.file_id))
        await self.store.set(_head_key(self.file_id), str(self.chunks).encode())
        for n in range(self.chunks, int(old or 0)):  # a replaced, longer file leaves no tail behind
            await self.store.delete(_chunk_key(self.file_id, n))
        return self.size

    async def abort(self) -> None:
        self.buffer.clear()
        for n in range(self.chunks):
            await self.store.delete(_chunk_key(self.file_id, n))


class StateFileStore(FileStore):
    kind = "state"

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def writer(self, file_id: str) -> FileWriter:
        return _StateWriter(self.store, file_id)

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        head = await self.store.get(_head_key(file_id))
        if head is None:
            raise FileMissing(file_id)
        for n in range(int(head)):
            data = await self.store.get(_chunk_key(file_id, n))
            if data is None:
                raise FileMissing(file_id)
            yield data

    async def delete(self, file_id: str) -> None:
        head = await self.store.get(_head_key(file_id))
        await self.store.delete(_head_key(file_id))
        for n in range(int(head or 0)):
            await self.store.delete(_chunk_key(file_id, n))


def open_file_store(settings: Settings, store: StateStore) -> FileStore:
    """``GATEWAY_FILES_DIR`` when set; else chunks in the state store with Redis, else ``<data dir>/files``."""
    if settings.files_dir:
        return DirectoryFileStore(settings.files_dir)
    if settings.redis_url:
        return StateFileStore(store)
    return DirectoryFileStore(data_path(settings, "files"))
