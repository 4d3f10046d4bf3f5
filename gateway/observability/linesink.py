"""The request-log line sink: one JSON line per request to stdout, a file, or nowhere."""

from __future__ import annotations

import os

_PIPE_BUF = 4096


class LineSink:
    """JSON lines to stdout (default), to a file (appended), or nowhere (``off``). Writes are whole lines of at
    most PIPE_BUF bytes where possible, so workers sharing stdout do not interleave inside a line. Blocking."""

    def __init__(self, target: str | None) -> None:
        target = (target or "").strip()
        self.enabled = target.lower() not in ("off", "none", "0", "false")
        self._fd: int | None = None
        self._owned = False
        if not self.enabled:
            return
        if target in ("", "-", "stdout"):
            self._fd = 1
        elif target == "stderr":
            self._fd = 2
        else:
            self._fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            self._owned = True

    def write(self, lines: list[bytes]) -> None:
        if self._fd is None or not lines:
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
