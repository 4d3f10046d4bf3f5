"""Reading a server-sent-event response in tests: connect, then take events as they arrive (bounded waits)."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import msgspec

from tests.support.mounts import mounted


class EventStream:
    """A GET whose answer is read event by event; ``events`` waits (bounded) for the next ones."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = 10.0) -> None:
        in_process = mounted(url)
        #: the same answer from an in-process gateway (``tests/support/inprocess.py``), which this object reads
        self.in_process = None if in_process is None else in_process.events("GET", url, None, headers, timeout)
        if self.in_process is not None:
            self.status, self.headers, self.ended = self.in_process.status, self.in_process.headers, False
            return
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        self.conn.request("GET", path, headers=headers or {})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self.ended = False

    def read_event(self, timeout: float) -> tuple[str, str, str | None] | None:
        """The next (event, data, id), None when nothing came within ``timeout`` or the stream ended."""
        if self.in_process is not None:
            got = self.in_process.read_event(timeout)
            self.ended = self.in_process.ended
            return got
        sock = self.conn.sock
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if sock is not None:
                sock.settimeout(remaining)
            try:
                raw = self.response.readline()
            except TimeoutError:
                return None
            if not raw:
                self.ended = True
                return None
            line = raw.decode().rstrip("\r\n")
            if line:
                lines.append(line)
                continue
            parsed = parse_event("\n".join(lines))
            if parsed is not None:
                return parsed
            lines = []

    def logs(self, count: int, timeout: float = 5.0) -> list[dict]:
        """The next ``count`` log items (fewer when ``timeout`` runs out first)."""
        return read_logs(self.read_event, count, timeout)

    def close(self) -> None:
        if self.in_process is not None:
            self.in_process.close()
        else:
            self.conn.close()


def parse_event(block: str) -> tuple[str, str, str | None] | None:
    """One SSE event's lines as ``(event, data, id)``; None when it holds no data (comments, a lone id)."""
    event, data, event_id = "message", [], None
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value
    return (event, "\n".join(data), event_id) if data else None


def read_logs(read_event: Callable[[float], tuple[str, str, str | None] | None], count: int,
              timeout: float) -> list[dict]:
    """The next ``count`` log items of a log stream read with ``read_event`` (fewer when ``timeout`` runs out)."""
    items: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(items) < count:
        got = read_event(max(0.0, deadline - time.monotonic()))
        if got is None:
            break
        if got[0] == "log":
            items.append(msgspec.json.decode(got[1]))
    return items
