"""The request-log line sink: one JSON line per request to stdout, a file, or nowhere."""

from __future__ import annotations

import os
import stat

_PIPE_BUF = 4096


class LineSink:
    """JSON lines to stdout (default), to a file (appended), or nowhere (``off``). Workers share the target, so no
    line may be split by another's: to a regular file a batch goes in one write, to a pipe, terminal or socket in
    writes of whole lines of at most PIPE_BUF bytes where possible. Blocking."""

    def __init__(self, target: str | None) -> None:
        target = (target or "").strip()
        self.enabled = target.lower() not in ("off", "none", "0", "false")
        self._fd: int | None = None
        self._owned = False
        self._whole = False
        if not self.enabled:
            return
        if target in ("", "-", "stdout"):
            self._fd = 1
        elif target == "stderr":
            self._fd = 2
        else:
            self._fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            self._owned = True
        self._whole = _regular_file(self._fd)

    def write(self, lines: list[bytes]) -> None:
        if self._fd is None or not lines:
            return
        if self._whole:
            self._write_all(b"\n".join(lines) + b"\n")
            return
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            n = len(line) + 1
            if chunk and size + n > _PIPE_BUF:
                self._write_all(b"\n".join(chunk) + b"\n")
                chunk, size = [], 0
            chunk.append(line)
            size += n
        if chunk:
            self._write_all(b"\n".join(chunk) + b"\n")

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)  # type: ignore[arg-type]
            view = view[written:]

    def close(self) -> None:
        if self._owned and self._fd is not None:
            os.close(self._fd)
        self._fd = None


def _regular_file(fd: int) -> bool:
    """Whether ``fd`` is a regular file: one write there is never split by another worker's (the workers share
    one open file, and the kernel serialises writes to it), so a batch's lines go in one write. Pipes, terminals
    and sockets only keep writes of up to PIPE_BUF bytes whole."""
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False
