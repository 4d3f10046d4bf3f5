"""Gateway file bytes: written in pieces, read back whole in pieces, replaced and deleted, on disk and in the
state store (where any instance reads what another wrote)."""

from __future__ import annotations

import os

import pytest

from gateway.jobs.filestore import CHUNK_BYTES, DirectoryFileStore, FileMissing, StateFileStore, open_file_store
from gateway.settings import Settings
from gateway.state.memory import MemoryStateStore
from tests.jobs.conftest import opened_store


@pytest.fixture(params=["directory", "state-memory", "state-embedded", "state-redis"])
async def blobs(request, tmp_path):
    if request.param == "directory":
        yield DirectoryFileStore(tmp_path / "files")
        return
    async for store in opened_store(request.param.split("-")[1], tmp_path):
        yield StateFileStore(store)


async def read_all(blobs, file_id: str) -> bytes:
    return b"".join([piece async for piece in blobs.read(file_id)])


async def test_pieces_written_are_read_back_in_order(blobs):
    data = os.urandom(CHUNK_BYTES * 2 + 12345)
    writer = blobs.writer("file-gw-a")
    for start in range(0, len(data), 70_000):
        await writer.write(data[start:start + 70_000])
    assert await writer.commit() == len(data)
    assert await read_all(blobs, "file-gw-a") == data


async def test_nothing_is_readable_before_commit_and_abort_leaves_nothing(blobs):
    writer = blobs.writer("file-gw-b")
    await writer.write(b"x" * (CHUNK_BYTES + 1))
    with pytest.raises(FileMissing):
        await read_all(blobs, "file-gw-b")
    await writer.abort()
    with pytest.raises(FileMissing):
        await read_all(blobs, "file-gw-b")


async def test_a_shorter_replacement_and_a_delete(blobs):
    for size in (CHUNK_BYTES * 3, 10):
        writer = blobs.writer("file-gw-c")
        await writer.write(b"y" * size)
        await writer.commit()
    assert await read_all(blobs, "file-gw-c") == b"y" * 10
    await blobs.delete("file-gw-c")
    await blobs.delete("file-gw-c")  # twice is fine
    with pytest.raises(FileMissing):
        await read_all(blobs, "file-gw-c")


async def test_an_empty_file_reads_as_empty(blobs):
    writer = blobs.writer("file-gw-d")
    assert await writer.commit() == 0
    assert await read_all(blobs, "file-gw-d") == b""


async def test_directory_store_refuses_ids_that_leave_its_directory(tmp_path):
    blobs = DirectoryFileStore(tmp_path / "files")
    for bad in ("../x", ".hidden", ""):
        with pytest.raises(FileMissing):
            await read_all(blobs, bad)


def test_the_settings_pick_the_store(tmp_path):
    store = MemoryStateStore()
    assert open_file_store(Settings(data_dir=str(tmp_path)), store).kind == "directory"
    assert open_file_store(Settings(data_dir=str(tmp_path), redis_url="redis://x"), store).kind == "state"
    shared = open_file_store(Settings(data_dir=str(tmp_path), redis_url="redis://x",
                                      files_dir=str(tmp_path / "shared")), store)
    assert shared.kind == "directory" and (tmp_path / "shared").is_dir()
