"""Writing AWS's binary event stream (``application/vnd.amazon.eventstream``), as cloudA's streaming answers do.

The mock has its own encoder so that the gateway's decoder is checked against an independent writer. Facts relied
on (AWS's public "event stream encoding" description):

- a message is: total length (4 bytes), headers length (4 bytes), CRC32 of those 8 bytes (4 bytes), the headers,
  the payload, and a CRC32 of everything before it (4 bytes); integers are unsigned big-endian and the total
  length counts the whole message, both CRCs included (16 bytes of framing around headers and payload);
- the CRC is the common CRC-32 (the polynomial of zlib and gzip);
- a header is its name's length (1 byte), the UTF-8 name, a value type (1 byte) and the value; a string value is
  type 7, a 2-byte big-endian length and the UTF-8 bytes (the only type the mock writes);
- a streamed event carries ``:event-type`` (the member name), ``:content-type`` and ``:message-type`` ``event``;
  a modelled in-band error carries ``:exception-type`` and ``:message-type`` ``exception`` instead.
"""

from __future__ import annotations

import struct
import zlib

_STRING = 7


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
    return bytes((len(raw_name),)) + raw_name + bytes((_STRING,)) + struct.pack(">H", len(raw_value)) + raw_value


def message(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One framed message with string-valued ``headers`` in the order given."""
    head = b"".join(_header(name, value) for name, value in headers)
    lengths = struct.pack(">II", 16 + len(head) + len(payload), len(head))
    framed = lengths + struct.pack(">I", zlib.crc32(lengths)) + head + payload
    return framed + struct.pack(">I", zlib.crc32(framed))


def event(event_type: str, payload: bytes) -> bytes:
    """An ``event`` message with a JSON payload."""
    return message([(":event-type", event_type), (":content-type", "application/json"),
                    (":message-type", "event")], payload)


def exception(exception_type: str, payload: bytes) -> bytes:
    """An ``exception`` message (a modelled error such as ``throttlingException``) with a JSON payload."""
    return message([(":exception-type", exception_type), (":content-type", "application/json"),
                    (":message-type", "exception")], payload)
