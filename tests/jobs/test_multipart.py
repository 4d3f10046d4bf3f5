"""The streaming multipart parser: parts, fields and file bytes come out the same however the body is cut."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.jobs.multipart import (
    PART_END,
    MultipartError,
    MultipartParser,
    PartStart,
    boundary_of,
    header_params,
)

BOUNDARY = "----formdata-test-7d3a"


def body(parts: list[tuple[str, str | None, bytes]], boundary: str = BOUNDARY, preamble: bytes = b"") -> bytes:
    out = [preamble]
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.append(f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode())
        if filename:
            out.append(b"Content-Type: application/jsonl\r\n")
        out.append(b"\r\n" + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out)


def parse(raw: bytes, cuts: list[int] | None = None, boundary: str = BOUNDARY) -> list[tuple[str, str | None, bytes]]:
    parser = MultipartParser(boundary)
    pieces = []
    start = 0
    for cut in sorted(set(cuts or [])):
        pieces.append(raw[start:cut])
        start = cut
    pieces.append(raw[start:])
    parts: list[tuple[str, str | None, bytes]] = []
    current: list = []
    for piece in pieces:
        for event in parser.feed(piece):
            if isinstance(event, PartStart):
                current = [event.name, event.filename, b""]
            elif event is PART_END:
                parts.append((current[0], current[1], current[2]))
            else:
                current[2] += event
    parser.close()
    return parts


def test_fields_and_a_file_come_out_with_names_and_bytes():
    raw = body([("purpose", None, b"batch"), ("file", "in.jsonl", b'{"a": 1}\n{"b": 2}\n')])
    assert parse(raw) == [("purpose", None, b"batch"), ("file", "in.jsonl", b'{"a": 1}\n{"b": 2}\n')]


def test_data_that_looks_like_a_boundary_without_its_crlf_stays_data():
    tricky = f"--{BOUNDARY} is not a delimiter here\r\n--{BOUNDARY[:-1]}".encode()
    assert parse(body([("file", "x.bin", tricky)])) == [("file", "x.bin", tricky)]


def test_preamble_and_epilogue_are_ignored():
    raw = body([("purpose", None, b"batch")], preamble=b"this is a preamble\r\n") + b"epilogue"
    assert parse(raw) == [("purpose", None, b"batch")]


@pytest.mark.parametrize("raw, what", [
    (b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue", "closing"),
    (b"--" + BOUNDARY.encode() + b"\r\nContent-Type: text/plain\r\n\r\nx\r\n--" + BOUNDARY.encode() + b"--",
     "name"),
    (b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--"
     + BOUNDARY.encode() + b"--", "form-data"),
])
def test_malformed_bodies_are_refused(raw, what):
    with pytest.raises(MultipartError, match=what):
        parse(raw)


def _headers_body(headers: bytes) -> bytes:
    b = BOUNDARY.encode()
    return b"--" + b + b"\r\n" + headers + b"\r\n\r\nx\r\n--" + b + b"--\r\n"


@pytest.mark.parametrize("headers, param, what", [
    (b'Content-Disposition: form-data; name="file"; filename="a\nb.png"', "file", "filename"),
    (b'Content-Disposition: form-data; name="file"; filename="a\rb.png"', "file", "filename"),
    (b'Content-Disposition: form-data; name="file"; filename="a\x00.png"', "file", "filename"),
    (b'Content-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\rX-Evil: 1',
     "image", "Content-Type"),
    (b'Content-Disposition: form-data; name="image"; filename="a.png"\r\nX-Other: a\nb', "image", "headers"),
    (b'Content-Disposition: form-data; name="a\nb"', None, "name"),
])
def test_a_bare_cr_lf_or_nul_in_a_part_header_is_refused_naming_the_field(headers, param, what):
    with pytest.raises(MultipartError, match=what) as caught:
        parse(_headers_body(headers))
    assert caught.value.param == param


def test_boundary_comes_from_the_content_type_quoted_or_not():
    assert boundary_of(f"multipart/form-data; boundary={BOUNDARY}") == BOUNDARY
    assert boundary_of('multipart/form-data; charset=utf-8; boundary="a b;c"') == "a b;c"
    for bad in ("application/json", "multipart/form-data", "multipart/form-data; boundary=" + "x" * 71):
        with pytest.raises(MultipartError):
            boundary_of(bad)


def test_header_params_unquote_and_unescape():
    assert header_params(' name="file"; filename="a \\"b\\".jsonl"; x=1') == {
        "name": "file", "filename": 'a "b".jsonl', "x": "1"}


def test_a_large_file_is_handed_on_in_pieces_never_whole():
    data = b"0123456789abcdef" * 65536  # 1 MiB
    raw = body([("file", "big.bin", data)])
    parser = MultipartParser(BOUNDARY)
    largest = 0
    got = bytearray()
    for start in range(0, len(raw), 65536):
        for event in parser.feed(raw[start:start + 65536]):
            if isinstance(event, bytes):
                largest = max(largest, len(event))
                got += event
    parser.close()
    assert bytes(got) == data
    assert largest <= 65536 + len(BOUNDARY) + 4


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.tuples(st.sampled_from(["purpose", "file", "note"]), st.binary(max_size=300)), max_size=4),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
def test_any_cutting_of_the_body_gives_the_same_parts(parts, cuts):
    expected = [(name, "f.bin" if name == "file" else None, data) for name, data in parts]
    raw = body(expected)
    assert parse(raw, [c for c in cuts if c < len(raw)]) == expected
