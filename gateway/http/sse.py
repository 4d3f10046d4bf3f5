"""Server-Sent Events on the wire: the incremental splitter for upstream streams and the encoder for ours.

Pure-Python twin of ``gateway._speedups.sse`` (``gateway._speedups.sse_in_use`` names the one in use). Splitting follows
the WHATWG event-stream rules: lines end with CRLF, LF or CR (also when a CRLF straddles two chunks); a blank
line dispatches the pending event; ``data`` lines are joined with LF; one space after the colon is dropped;
lines starting with ``:`` are comments; a line without a colon is a field with an empty value; ``event`` names
the next event (an empty name means the default, reported as ``None``); ``id``, ``retry`` and unknown fields
are ignored; an event without any ``data`` line is not dispatched. Unlike a browser, ``close()`` hands out a
final event that the stream ended without a blank line.

Buffering is linear: an unfinished line is kept as a list of chunk pieces and joined once, when its end
arrives, so a huge event delivered in many small chunks is never re-scanned.
"""

from __future__ import annotations

__all__ = ["DONE", "RELAY_CR", "RELAY_DONE", "RELAY_ERROR", "RELAY_USAGE", "Event", "SseSplitter", "encode_event",
           "is_done", "scan_relay"]

#: One dispatched event: (event name or None, data).
Event = tuple["bytes | None", bytes]

#: The vendorA end-of-stream event.
DONE: bytes = b"data: [DONE]\n\n"

#: ``scan_relay`` flags: what in a chunk keeps it from being relayed as received
RELAY_CR = 1  # a CR (line ends the relay does not pass through)
RELAY_ERROR = 2  # an ``"error"`` member
RELAY_DONE = 4  # the ``[DONE]`` marker
RELAY_USAGE = 8  # a ``"usage"`` member that is not ``"usage":null``
_NULL_USAGE_MEMBER = b',"usage":null'

_DONE_DATA = b"[DONE]"


class SseSplitter:
    """Turns stream chunks, cut anywhere, into complete ``(event_name_or_None, data)`` events."""

    __slots__ = ("_partial", "_cr", "_event", "_data")

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # pieces of the unfinished last line
        self._cr = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._event: bytes | None = None
        self._data: list[bytes] = []

    def feed(self, data: bytes) -> list[Event]:
        """The events completed by ``data`` (possibly none)."""
        if type(data) is not bytes:
            data = bytes(data)
        if not data:
            return []
        if self._cr:
            self._cr = False
            if data[0] == 10:
                data = data[1:]
                if not data:
                    return []
        partial = self._partial
        if partial:
            partial.append(data)
            if b"\n" not in data and b"\r" not in data:
                return []
            data = b"".join(partial)
            self._partial = []
        lines = data.splitlines()
        last = data[-1]
        if last == 13:
            self._cr = True
        elif last != 10:
            self._partial = [lines.pop()]
        if not lines:
            return []
        events: list[Event] = []
        event = self._event
        data_lines = self._data
        for line in lines:
            if not line:
                if data_lines:
                    events.append((event, b"\n".join(data_lines)))
                    data_lines = []
                event = None
                continue
            if line[:6] == b"data: ":
                data_lines.append(line[6:])
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data_lines.append(value)
            elif name == b"event":
                event = value or None
        self._event = event
        self._data = data_lines
        return events

    def close(self) -> list[Event]:
        """The last event when the stream ended without its blank line; then starts over, empty."""
        partial = self._partial
        events: list[Event] = []
        if partial:
            self.feed(b"\n")  # the unfinished line is a whole line at end of stream
        if self._data:
            events.append((self._event, b"\n".join(self._data)))
        self._partial = []
        self._cr = False
        self._event = None
        self._data = []
        return events


def encode_event(data: bytes, event: bytes | None = None) -> bytes:
    """The wire form of one event: ``event: NAME`` (when named), one ``data:`` line per line of data, a blank line.

    CR, LF and CRLF inside ``data`` all end a line (SSE cannot carry a bare CR in data). An event name containing
    CR or LF raises ValueError: it would break the framing.
    """
    if type(data) is not bytes:
        data = bytes(data)
    if event is None:
        head = b""
    else:
        if type(event) is not bytes:
            event = bytes(event)
        if b"\n" in event or b"\r" in event:
            raise ValueError("event name must not contain CR or LF")
        head = b"event: " + event + b"\n"
    if b"\n" not in data and b"\r" not in data:
        return head + b"data: " + data + b"\n\n"
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return head + b"data: " + data.replace(b"\n", b"\ndata: ") + b"\n\n"


def is_done(data: bytes) -> bool:
    """True when an event's data is vendorA's ``[DONE]`` marker (ASCII whitespace around it allowed)."""
    if type(data) is not bytes:
        data = bytes(data)
    return data == _DONE_DATA or data.strip() == _DONE_DATA


def scan_relay(chunk: bytes, strip_null_usage: bool) -> tuple[bytes, int]:
    """``(chunk, flags)`` for a vendorA-format stream chunk: the ``RELAY_*`` flags of what the chunk as received
    holds, and the chunk with every ``,"usage":null`` member removed when ``strip_null_usage`` (the same object
    when it has none). A chunk with no flag set, starting and ending on event boundaries, can be relayed as it is."""
    if type(chunk) is not bytes:
        chunk = bytes(chunk)
    flags = 0
    if b"\r" in chunk:
        flags |= RELAY_CR
    if b'"error"' in chunk:
        flags |= RELAY_ERROR
    if b"[DONE]" in chunk:
        flags |= RELAY_DONE
    if b'"usage"' in chunk and chunk.count(b'"usage"') != chunk.count(b'"usage":null'):
        flags |= RELAY_USAGE
    if strip_null_usage:
        chunk = chunk.replace(_NULL_USAGE_MEMBER, b"")
    return chunk, flags
