"""A worker's spool file: request records kept on local disk while the PostgreSQL log store is away or slow, read
back in the order written once it answers again.

The file (``<data dir>/log-spool/worker-<pid>.spool``) is a sequence of frames, each a 4-byte length and a msgpack
list of records; ``<file>.pos`` holds the offset up to which frames were stored in PostgreSQL (written after each
stored frame, atomically). Once everything is read the file is emptied. A record stored whose offset was not yet
written (a crash in between) is read again and skipped by the store (its idempotent key), so each record is stored
exactly once. The worker holds an exclusive ``flock`` on its file; at start, a worker adopts the files no live
worker holds (a worker that stopped with records spooled): their unread frames are appended to its own file.

Bounded: beyond ``max_bytes`` a batch is refused (the caller drops and counts it). Every method blocks: call them
in a thread.
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path
from typing import Any

import msgspec

_HEADER = struct.Struct(">I")
_encode = msgspec.msgpack.encode
_decode = msgspec.msgpack.decode


class Spool:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.path = directory / f"worker-{os.getpid()}.spool"
        self._file: Any = None
        self._pos = 0
        self._size = 0
        #: records written to the file and not yet read back and stored
        self.records = 0

    @property
    def bytes(self) -> int:
        """Bytes waiting to be stored."""
        return self._size - self._pos

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "spool.lock", "ab") as guard:  # workers starting at once take turns here, so
            fcntl.flock(guard.fileno(), fcntl.LOCK_EX)             # none adopts a file before its owner locks it
            self._open_locked()

    def _open_locked(self) -> None:
        self._file = open(self.path, "a+b")  # held open for the worker's life
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX)
        self._size = os.fstat(self._file.fileno()).st_size
        self._pos = _read_pos(self.path, self._size)
        good = self._pos
        self.records = 0
        for batch, after in _frames(self.path, self._pos):
            self.records += len(batch)
            good = after
        if good < self._size:  # a torn last frame (a crash mid-write): cut it so later frames stay readable
            self._file.truncate(good)
            self._size = good
        for other in sorted(self.directory.glob("*.spool")):
            if other != self.path:
                self._adopt(other)

    def _adopt(self, other: Path) -> None:
        try:
            handle = open(other, "rb")
        except FileNotFoundError:
            return
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # a live worker's
            if not other.exists():  # adopted and removed by another worker meanwhile
                return
            size = os.fstat(handle.fileno()).st_size
            for batch, _ in _frames(other, _read_pos(other, size)):
                self.append(batch, bounded=False)
            other.unlink()
            Path(str(other) + ".pos").unlink(missing_ok=True)

    def append(self, records: list[Any], bounded: bool = True) -> bool:
        """Add one batch at the end; False (nothing written) when it would pass ``max_bytes``."""
        data = _encode(records)
        if bounded and self.bytes + len(data) + _HEADER.size > self.max_bytes:
            return False
        self._file.write(_HEADER.pack(len(data)) + data)
        self._file.flush()
        self._size += len(data) + _HEADER.size
        self.records += len(records)
        return True

    def read(self, max_records: int) -> tuple[list[Any], int]:
        """The oldest unread frames (whole frames, at least one, up to about ``max_records``) and the offset to
        ``commit`` once they are stored."""
        out: list[Any] = []
        end = self._pos
        for batch, after in _frames(self.path, self._pos):
            if out and len(out) + len(batch) > max_records:
                break
            out.extend(batch)
            end = after
        return out, end

    def commit(self, offset: int, count: int) -> None:
        """Frames up to ``offset`` (``count`` records) are stored: remember it, and empty the file when all are."""
        self.records = max(0, self.records - count)
        if offset >= self._size:
            self._file.truncate(0)
            self._size = self._pos = 0
            self.records = 0
        else:
            self._pos = offset
        _write_pos(self.path, self._pos)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            if self._size == 0:
                self.path.unlink(missing_ok=True)
                Path(str(self.path) + ".pos").unlink(missing_ok=True)


def _read_pos(path: Path, size: int) -> int:
    try:
        pos = int(Path(str(path) + ".pos").read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0
    return pos if 0 <= pos <= size else 0  # beyond the end: the file was emptied after the offset was written


def _write_pos(path: Path, pos: int) -> None:
    tmp = Path(str(path) + ".pos.tmp")
    tmp.write_text(str(pos))
    os.replace(tmp, str(path) + ".pos")


def _frames(path: Path, start: int) -> Any:
    """(records, offset after the frame) from ``start``; a torn last frame (a crash mid-write) ends the file."""
    with open(path, "rb") as handle:
        handle.seek(start)
        offset = start
        while True:
            head = handle.read(_HEADER.size)
            if len(head) < _HEADER.size:
                return
            (length,) = _HEADER.unpack(head)
            data = handle.read(length)
            if len(data) < length:
                return
            offset += _HEADER.size + length
            try:
                batch = _decode(data)
            except msgspec.DecodeError:
                return
            yield batch, offset
