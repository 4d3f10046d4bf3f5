"""The ``application/vnd.amazon.eventstream`` binary framing: an incremental decoder and an encoder.

Facts relied on (AWS's public "event stream encoding" description, shared by its streaming APIs, Bedrock's
ConverseStream among them):

- a message is a 12-byte prelude, headers, a payload and a 4-byte message CRC, all integers big-endian;
- prelude = total byte length of the whole message (4 bytes, counting itself and both CRCs), byte length of the
  headers section (4 bytes), and the CRC32 (the gzip/zlib polynomial) of those 8 bytes; the message CRC covers every
  byte before it, the prelude and its CRC included; so the fixed overhead is 16 bytes;
- a header is name length (1 byte), UTF-8 name, value type (1 byte) and the value; value types are
  0 bool true and 1 bool false (no value bytes), 2 byte (1), 3 short (2), 4 integer (4), 5 long (8, all signed),
  6 byte array and 7 UTF-8 string (2-byte length + bytes), 8 timestamp (8-byte signed milliseconds since the epoch),
  9 UUID (16 bytes); a header name appears at most once per message;
- streaming responses mark each message with ``:message-type`` (``event``, ``exception`` or ``error``),
  ``:event-type`` / ``:exception-type`` naming the member, and ``:content-type`` of the payload; ``error`` messages
  carry ``:error-code`` and ``:error-message`` headers.

The decoder accepts bytes cut at any boundary; a CRC mismatch or an impossible length raises EventStreamError.
The 16 MiB message and 128 KiB header bounds are sanity limits that stop a corrupt length from buffering forever.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any, Iterable, Mapping

TRUE, FALSE, BYTE, SHORT, INTEGER, LONG, BYTES, STRING, TIMESTAMP, UUID = range(10)
PRELUDE_LENGTH = 12
OVERHEAD = 16
MAX_MESSAGE_LENGTH = 16 * 1024 * 1024
MAX_HEADERS_LENGTH = 128 * 1024
MAX_VALUE_LENGTH = 32767

_crc32 = zlib.crc32
_prelude = struct.Struct(">III")
_u32 = struct.Struct(">I")
_u16 = struct.Struct(">H")
_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")


class EventStreamError(ValueError):
    """The bytes are not a well-formed event stream (bad CRC, impossible length, malformed header)."""


class Byte(int):
    """A header value sent as a signed 1-byte integer."""


class Short(int):
    """A header value sent as a signed 2-byte integer."""


class Int32(int):
    """A header value sent as a signed 4-byte integer."""


class Long(int):
    """A header value sent as a signed 8-byte integer."""


class Timestamp(int):
    """A header value sent as a timestamp: milliseconds since the Unix epoch."""


class Message:
    """One decoded message: headers (name -> typed value) and the payload bytes."""

    __slots__ = ("headers", "payload")

    def __init__(self, headers: dict[str, Any], payload: bytes) -> None:
        self.headers = headers
        self.payload = payload

    @property
    def message_type(self) -> str:
        return self.headers.get(":message-type", "event")

    @property
    def event_type(self) -> str | None:
        return self.headers.get(":event-type")

    @property
    def exception_type(self) -> str | None:
        return self.headers.get(":exception-type")

    @property
    def content_type(self) -> str | None:
        return self.headers.get(":content-type")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and other.headers == self.headers and other.payload == self.payload

    def __repr__(self) -> str:
        return f"Message(headers={self.headers!r}, payload={self.payload[:64]!r})"


def _read_headers(data: bytes | memoryview, start: int, end: int) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    i = start
    try:
        while i < end:
            name_len = data[i]
            i += 1
            name = bytes(data[i:i + name_len]).decode("utf-8")
            i += name_len
            kind = data[i]
            i += 1
            if kind == STRING or kind == BYTES:
                length = _u16.unpack_from(data, i)[0]
                i += 2
                raw = bytes(data[i:i + length])
                if len(raw) != length:
                    raise EventStreamError(f"header {name!r} value overruns the headers section")
                i += length
                value: Any = raw.decode("utf-8") if kind == STRING else raw
            elif kind == TRUE:
                value = True
            elif kind == FALSE:
                value = False
            elif kind == BYTE:
                value = Byte(_i8.unpack_from(data, i)[0])
                i += 1
            elif kind == SHORT:
                value = Short(_i16.unpack_from(data, i)[0])
                i += 2
            elif kind == INTEGER:
                value = Int32(_i32.unpack_from(data, i)[0])
                i += 4
            elif kind == LONG:
                value = Long(_i64.unpack_from(data, i)[0])
                i += 8
            elif kind == TIMESTAMP:
                value = Timestamp(_i64.unpack_from(data, i)[0])
                i += 8
            elif kind == UUID:
                raw = bytes(data[i:i + 16])
                if len(raw) != 16:
                    raise EventStreamError(f"header {name!r} UUID overruns the headers section")
                value = uuid.UUID(bytes=raw)
                i += 16
            else:
                raise EventStreamError(f"header {name!r} has unknown value type {kind}")
            if i > end:
                raise EventStreamError(f"header {name!r} overruns the headers section")
            if name in headers:
                raise EventStreamError(f"header {name!r} appears twice")
            headers[name] = value
    except (IndexError, struct.error):
        raise EventStreamError("truncated header in the headers section") from None
    except UnicodeDecodeError:
        raise EventStreamError("header name or string value is not UTF-8") from None
    return headers


class EventStreamDecoder:
    """Feed raw bytes as they arrive; get back the messages they complete."""

    __slots__ = ("_buf", "max_message_length")

    def __init__(self, max_message_length: int = MAX_MESSAGE_LENGTH) -> None:
        self._buf = bytearray()
        self.max_message_length = max_message_length

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet make a whole message."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Message]:
        buf = self._buf
        buf += data
        out: list[Message] = []
        size = len(buf)
        pos = 0
        with memoryview(buf) as view:
            while size - pos >= PRELUDE_LENGTH:
                total, headers_len, prelude_crc = _prelude.unpack_from(view, pos)
                if _crc32(view[pos:pos + 8]) != prelude_crc:
                    raise EventStreamError("prelude CRC mismatch")
                if total < OVERHEAD or total > self.max_message_length:
                    raise EventStreamError(f"impossible message length {total}")
                if headers_len > total - OVERHEAD or headers_len > MAX_HEADERS_LENGTH:
                    raise EventStreamError(f"impossible headers length {headers_len} in a {total}-byte message")
                end = pos + total
                if end > size:
                    break
                message_crc = _u32.unpack_from(view, end - 4)[0]
                if _crc32(view[pos + 8:end - 4], prelude_crc) != message_crc:
                    raise EventStreamError("message CRC mismatch")
                body = pos + PRELUDE_LENGTH
                headers = _read_headers(view, body, body + headers_len) if headers_len else {}
                out.append(Message(headers, bytes(view[body + headers_len:end - 4])))
                pos = end
        if pos:
            del buf[:pos]
        return out


def decode_all(data: bytes) -> list[Message]:
    """Every message in ``data``, which must end on a message boundary."""
    decoder = EventStreamDecoder()
    messages = decoder.feed(data)
    if decoder.pending:
        raise EventStreamError(f"{decoder.pending} bytes left after the last whole message")
    return messages


# --- encoding ---------------------------------------------------------------------------------------------------

def _int_header(kind: int, packer: struct.Struct, value: int, lo: int, hi: int, name: str) -> bytes:
    if not lo <= value <= hi:
        raise EventStreamError(f"header {name!r} value {value} does not fit its type")
    return bytes((kind,)) + packer.pack(value)


def encode_header(name: str, value: Any) -> bytes:
    """One header's bytes; the value type follows the Python type (see Byte, Short, Int32, Long, Timestamp)."""
    raw_name = name.encode("utf-8")
    if not 0 < len(raw_name) <= 255:
        raise EventStreamError(f"header name {name!r} must be 1..255 bytes")
    head = bytes((len(raw_name),)) + raw_name
    if value is True:
        return head + bytes((TRUE,))
    if value is False:
        return head + bytes((FALSE,))
    if isinstance(value, Byte):
        return head + _int_header(BYTE, _i8, value, -(2 ** 7), 2 ** 7 - 1, name)
    if isinstance(value, Short):
        return head + _int_header(SHORT, _i16, value, -(2 ** 15), 2 ** 15 - 1, name)
    if isinstance(value, Timestamp):
        return head + _int_header(TIMESTAMP, _i64, value, -(2 ** 63), 2 ** 63 - 1, name)
    if isinstance(value, Long):
        return head + _int_header(LONG, _i64, value, -(2 ** 63), 2 ** 63 - 1, name)
    if isinstance(value, int):
        if -(2 ** 31) <= value < 2 ** 31:
            return head + _int_header(INTEGER, _i32, value, -(2 ** 31), 2 ** 31 - 1, name)
        return head + _int_header(LONG, _i64, value, -(2 ** 63), 2 ** 63 - 1, name)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        kind = STRING
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        kind = BYTES
    elif isinstance(value, uuid.UUID):
        return head + bytes((UUID,)) + value.bytes
    elif isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
        return head + _int_header(TIMESTAMP, _i64, int(stamp.timestamp() * 1000), -(2 ** 63), 2 ** 63 - 1, name)
    else:
        raise EventStreamError(f"header {name!r} has an unsupported value type {type(value).__name__}")
    if len(raw) > MAX_VALUE_LENGTH:
        raise EventStreamError(f"header {name!r} value is longer than {MAX_VALUE_LENGTH} bytes")
    return head + bytes((kind,)) + _u16.pack(len(raw)) + raw


def encode_message(headers: Mapping[str, Any] | Iterable[tuple[str, Any]], payload: bytes = b"") -> bytes:
    """One whole message (prelude, CRCs and all)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    header_bytes = b"".join(encode_header(name, value) for name, value in items)
    total = OVERHEAD + len(header_bytes) + len(payload)
    if total > MAX_MESSAGE_LENGTH:
        raise EventStreamError(f"message of {total} bytes is over the {MAX_MESSAGE_LENGTH}-byte limit")
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += _u32.pack(_crc32(prelude))
    body = prelude + header_bytes + payload
    return body + _u32.pack(_crc32(body))


def event_message(event_type: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """An ``event`` message as AWS streaming responses send them."""
    return encode_message(
        ((":event-type", event_type), (":content-type", content_type), (":message-type", "event")), payload
    )


def exception_message(exception_type: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """An ``exception`` message (a modelled in-band error such as ``throttlingException``)."""
    return encode_message(
        ((":exception-type", exception_type), (":content-type", content_type), (":message-type", "exception")),
        payload,
    )


def error_message(code: str, message: str) -> bytes:
    """An ``error`` message (an unmodelled failure: code and message in headers, no payload)."""
    return encode_message(((":error-code", code), (":error-message", message), (":message-type", "error")))
