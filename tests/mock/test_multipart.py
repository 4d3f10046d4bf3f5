"""The mock's own form reader: fields and filenames of a multipart body, the same answer as the gateway's parser."""

from __future__ import annotations

import pytest

from gateway.jobs.multipart import PART_END, MultipartParser, PartStart
from gateway.jobs.multipart import boundary_of as gateway_boundary_of
from gateway_mock.multipart import FormError, parse_form

CT = "multipart/form-data; boundary=XyZ"
BODY = (b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
        b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in put.jsonl\"\r\n"
        b"Content-Type: application/jsonl\r\n\r\n{\"a\": 1}\r\n\r\n{\"b\": \"--XyZ\"}\r\n--XyZ--\r\nepilogue")


def gateway_fields(content_type: str, body: bytes) -> tuple[dict[str, bytes], dict[str, str]]:
    parser = MultipartParser(gateway_boundary_of(content_type))
    fields: dict[str, bytes] = {}
    filenames: dict[str, str] = {}
    current = None
    for event in parser.feed(body):
        if isinstance(event, PartStart):
            current = event.name
            fields[current] = b""
            if event.filename is not None:
                filenames[current] = event.filename
        elif event is PART_END:
            current = None
        elif current is not None and isinstance(event, bytes):
            fields[current] += event
    parser.close()
    return fields, filenames


def test_fields_and_filenames_match_the_gateways_parser():
    fields, filenames = parse_form(CT, BODY)
    assert fields == {"purpose": b"batch", "file": b'{"a": 1}\r\n\r\n{"b": "--XyZ"}'}
    assert filenames == {"file": "in put.jsonl"}
    assert (fields, filenames) == gateway_fields(CT, BODY)


def test_a_quoted_boundary_and_a_body_that_opens_with_it():
    body = b'--a b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--a b--\r\n'
    assert parse_form('multipart/form-data; boundary="a b"', body) == ({"x": b"1"}, {})


@pytest.mark.parametrize(("content_type", "body", "text"), [
    ("application/json", BODY, "must be multipart/form-data"),
    ("multipart/form-data", BODY, "no valid boundary"),
    ("multipart/form-data; boundary=" + "b" * 71, BODY, "no valid boundary"),
    (CT, b"no delimiter at all", "no part"),
    (CT, b'--XyZ\r\nContent-Disposition: form-data; name="x"\r\n\r\n1', "closing delimiter"),
    (CT, b"--XyZ\r\nContent-Type: text/plain\r\n\r\n1\r\n--XyZ--", "Content-Disposition"),
    (CT, b'--XyZ\r\nContent-Disposition: form-data; name="x"\r\n1\r\n--XyZ--', "empty line"),
    (CT, b'--XyZ\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--XyZ-not\r\n--XyZ--', "line break"),
])
def test_malformed_bodies_are_refused_with_the_reason(content_type, body, text):
    with pytest.raises(FormError, match=text):
        parse_form(content_type, body)
