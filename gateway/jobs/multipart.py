"""A push parser for ``multipart/form-data`` bodies: chunks in, part headers and data pieces out, never whole.

Facts relied on (RFC 7578 and RFC 2046 section 5.1.1): the ``boundary`` parameter of the Content-Type (1 to 70
characters, possibly quoted) delimits parts as ``--boundary`` at the start of the body or ``CRLF--boundary``
later; a delimiter is followed by CRLF and the part's headers (ending with an empty line), or by ``--`` at the end
of the body. Each part names its field in ``Content-Disposition: form-data; name="..."`` (with ``filename="..."``
for a file). Anything before the first delimiter and after the last is ignored.

The parser keeps at most one delimiter's length of a part's data back (a delimiter may straddle two chunks), so
memory stays bounded whatever the part's size. Malformed input raises ``MultipartError``.
"""

from __future__ import annotations

MAX_HEADER_BYTES = 16 * 1024


class MultipartError(ValueError):
    """The body is not well-formed multipart/form-data; ``param`` names the form field concerned, when known."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class PartStart:
    """A part begins: its field ``name``, ``filename`` (None for a plain field) and ``content_type``."""

    __slots__ = ("name", "filename", "content_type")

    def __init__(self, name: str, filename: str | None, content_type: str | None) -> None:
        self.name = name
        self.filename = filename
        self.content_type = content_type


class PartEnd:
    """The current part ended."""

    __slots__ = ()


PART_END = PartEnd()
Event = PartStart | bytes | PartEnd


def boundary_of(content_type: str) -> str:
    """The boundary parameter of a ``multipart/form-data`` Content-Type; MultipartError when absent or bad."""
    kind, _, rest = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise MultipartError("the body must be multipart/form-data")
    params = header_params(rest)
    boundary = params.get("boundary")
    if not boundary or len(boundary) > 70:
        raise MultipartError("the multipart/form-data Content-Type has no valid boundary")
    return boundary


def header_params(text: str) -> dict[str, str]:
    """``; a=1; b="x; y"`` -> ``{"a": "1", "b": "x; y"}`` (names lower-cased; quotes and escapes removed)."""
    params: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t;":
            i += 1
        start = i
        while i < n and text[i] not in "=;":
            i += 1
        name = text[start:i].strip().lower()
        if i >= n or text[i] == ";":
            continue
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == '"':
            i += 1
            value = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
            i += 1
            params[name] = "".join(value)
        else:
            start = i
            while i < n and text[i] != ";":
                i += 1
            params[name] = text[start:i].strip()
    return params


def _part_start(raw: bytes) -> PartStart:
    name = filename = content_type = None
    lines = raw.decode("utf-8", "replace").split("\r\n")
    text = "".join(lines)
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "content-disposition":
            kind, _, rest = value.partition(";")
            if kind.strip().lower() != "form-data":
                raise MultipartError("a part's Content-Disposition must be form-data")
            params = header_params(rest)
            name = params.get("name")
            filename = params.get("filename")
        elif key == "content-type":
            content_type = value.strip()
    if name is None:
        raise MultipartError("a part has no Content-Disposition name")
    _refuse_line_breaks(text, name, filename, content_type)
    return PartStart(name, filename, content_type)


def _refuse_line_breaks(text: str, name: str, filename: str | None, content_type: str | None) -> None:
    """A part's header lines end with CRLF: a bare CR or LF (or a NUL) left inside one would end a header line
    wherever the part is sent on, so such a part is refused, naming the field."""
    if "\r" not in text and "\n" not in text and "\0" not in text:
        return
    shown = repr(name) if _clean(name) else "a part"
    if filename is not None and not _clean(filename):
        what = f"the filename of {shown}"
    elif content_type is not None and not _clean(content_type):
        what = f"the Content-Type of {shown}"
    elif not _clean(name):
        what = "a part's name"
    else:
        what = f"the headers of {shown}"
    raise MultipartError(f"{what} holds a CR, LF or NUL character", param=name if _clean(name) else None)


def _clean(value: str) -> bool:
    return "\r" not in value and "\n" not in value and "\0" not in value


_PREAMBLE, _AFTER_DELIMITER, _HEADERS, _DATA, _DONE = range(5)


class MultipartParser:
    """Feed body chunks; each ``feed`` returns the events they complete: ``PartStart``, data ``bytes`` pieces
    of the current part, ``PART_END``. ``close`` checks the body ended with the closing delimiter."""

    __slots__ = ("_delimiter", "_buffer", "_state")

    def __init__(self, boundary: str) -> None:
        # the stream is read as if it began with CRLF, so every delimiter is CRLF--boundary
        self._delimiter = b"\r\n--" + boundary.encode("latin-1")
        self._buffer = bytearray(b"\r\n")
        self._state = _PREAMBLE

    @property
    def done(self) -> bool:
        return self._state == _DONE

    def feed(self, chunk: bytes) -> list[Event]:
        if self._state == _DONE:
            return []
        self._buffer += chunk
        events: list[Event] = []
        while self._step(events):
            pass
        return events

    def close(self) -> None:
        if self._state != _DONE:
            raise MultipartError("the multipart body ended before its closing boundary")

    def _step(self, events: list[Event]) -> bool:
        """Advance one state on the buffered bytes; False when more input is needed."""
        buffer = self._buffer
        delimiter = self._delimiter
        state = self._state
        if state == _PREAMBLE:
            at = buffer.find(delimiter)
            if at < 0:
                del buffer[:max(0, len(buffer) - len(delimiter))]
                return False
            del buffer[:at + len(delimiter)]
            self._state = _AFTER_DELIMITER
            return True
        if state == _AFTER_DELIMITER:
            if len(buffer) < 2:
                return False
            head = bytes(buffer[:2])
            if head == b"--":
                self._state = _DONE
                buffer.clear()
                return False
            # transport padding (spaces, tabs) may precede the CRLF
            end = buffer.find(b"\r\n")
            if end < 0:
                if len(buffer) > 256:
                    raise MultipartError("malformed multipart delimiter line")
                return False
            if buffer[:end].strip(b" \t"):
                raise MultipartError("malformed multipart delimiter line")
            del buffer[:end + 2]
            self._state = _HEADERS
            return True
        if state == _HEADERS:
            if buffer.startswith(b"\r\n"):  # a part without headers
                raise MultipartError("a part has no Content-Disposition header")
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEADER_BYTES:
                    raise MultipartError("a part's headers are too large")
                return False
            events.append(_part_start(bytes(buffer[:end])))
            del buffer[:end + 4]
            self._state = _DATA
            return True
        if state == _DATA:
            at = buffer.find(delimiter)
            if at < 0:
                keep = len(delimiter) - 1
                if len(buffer) > keep:
                    cut = len(buffer) - keep
                    events.append(bytes(buffer[:cut]))
                    del buffer[:cut]
                return False
            if at:
                events.append(bytes(buffer[:at]))
            events.append(PART_END)
            del buffer[:at + len(delimiter)]
            self._state = _AFTER_DELIMITER
            return True
        return False
