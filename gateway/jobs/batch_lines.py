"""Reading and checking the lines of a batch input file (vendorA batch JSONL), streamed from the file store.

Facts relied on (vendorA's batch guide): each line is a JSON object ``{"custom_id", "method", "url", "body"}``;
``custom_id`` is unique within the file; ``method`` is ``POST``; ``url`` is the batch's endpoint; ``body`` is that
endpoint's request body. Here a line must also not ask to ``stream``, and its body must pass the endpoint's own
request checks (the same parser the endpoint uses), so a bad body is found before anything is sent.

Lines are numbered from 1 as they stand in the file; blank lines are not requests (they get no output line).
"""

from __future__ import annotations

from typing import AsyncIterator, Callable

import msgspec

from gateway.http.errors import GatewayError
from gateway.schema.batches import BatchError


class InputLine(msgspec.Struct, frozen=True, gc=False):
    custom_id: str
    method: str
    url: str
    body: msgspec.Raw


class _CustomIdOnly(msgspec.Struct, gc=False):
    custom_id: str | None = None


class _Streaming(msgspec.Struct, gc=False):
    stream: bool | None = None


_line_decoder = msgspec.json.Decoder(InputLine)
_custom_id_decoder = msgspec.json.Decoder(_CustomIdOnly)
_stream_decoder = msgspec.json.Decoder(_Streaming)
_any_decoder = msgspec.json.Decoder()


async def file_lines(pieces: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """``(line number, line bytes)`` for every non-blank line (CR LF or LF endings), numbered from 1."""
    number = 0
    tail = b""
    async for piece in pieces:
        data = tail + piece if tail else piece
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            number += 1
            line = data[start:end]
            if line.strip():
                yield number, line.rstrip(b"\r")
            start = end + 1
        tail = data[start:]
    if tail.strip():
        yield number + 1, tail.rstrip(b"\r")


def custom_id_of(line: bytes) -> str | None:
    """The line's custom_id when it has a string one (for output lines of lines that never ran)."""
    try:
        return _custom_id_decoder.decode(line).custom_id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class LineChecker:
    """Checks lines one by one against the batch's endpoint; remembers custom_ids to find duplicates."""

    def __init__(self, endpoint: str, parse: Callable[[bytes], object]) -> None:
        self.endpoint = endpoint
        self.parse = parse
        self.seen: set[str] = set()

    def check(self, number: int, line: bytes) -> tuple[InputLine | None, BatchError | None]:
        """The decoded line, or the error that makes it invalid (with its line number)."""
        try:
            item = _line_decoder.decode(line)
        except msgspec.ValidationError as exc:
            return None, _shape_error(number, line, exc)
        except msgspec.DecodeError:
            return None, BatchError("invalid_json_line", "this line is not valid JSON", None, number)
        if item.custom_id in self.seen:
            return None, BatchError("duplicate_custom_id",
                                    f"custom_id {item.custom_id!r} is used by an earlier line", "custom_id", number)
        self.seen.add(item.custom_id)
        if item.method != "POST":
            return None, BatchError("invalid_method", f"method must be POST, got {item.method!r}", "method", number)
        if item.url != self.endpoint:
            return None, BatchError("mismatched_endpoint",
                                    f"url {item.url!r} does not match the batch's endpoint {self.endpoint}", "url",
                                    number)
        body = bytes(item.body)
        try:
            streaming = _stream_decoder.decode(body).stream
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None, BatchError("invalid_body", "body must be a JSON object", "body", number)
        if streaming:
            return None, BatchError("invalid_body", "batch lines cannot stream: drop body.stream", "body.stream",
                                    number)
        try:
            self.parse(body)
        except GatewayError as error:
            param = f"body.{error.param}" if error.param else "body"
            return None, BatchError("invalid_body", error.message, param, number)
        return item, None


def _shape_error(number: int, line: bytes, exc: msgspec.ValidationError) -> BatchError:
    try:
        doc = _any_decoder.decode(line)
    except msgspec.DecodeError:
        doc = None
    if not isinstance(doc, dict):
        return BatchError("invalid_json_line", "each line must be a JSON object", None, number)
    for field in ("custom_id", "method", "url", "body"):
        if field not in doc:
            return BatchError("missing_required_parameter", f"{field} is required", field, number)
    text = str(exc)
    param = None
    for field in ("custom_id", "method", "url", "body"):
        if f"$.{field}" in text:
            param = field
    if param == "body":
        return BatchError("invalid_body", "body must be a JSON object", "body", number)
    return BatchError("invalid_request", f"invalid line: {text}", param, number)

