"""The mock's own event-stream encoder: AWS's published encoding vectors, and the gateway's decoder reads it."""

from __future__ import annotations

import msgspec

from gateway.providers.cloudA import eventstream as gateway_eventstream
from gateway_mock import eventstream

PAYLOAD = b"{'foo':'bar'}"
# From AWS's event-stream encoding test vectors (empty_message, payload_no_headers, payload_one_str_header).
EMPTY_MESSAGE = bytes([0, 0, 0, 16, 0, 0, 0, 0, 5, 194, 72, 235, 125, 152, 200, 255])
PAYLOAD_NO_HEADERS = bytes([0, 0, 0, 29, 0, 0, 0, 0, 253, 82, 140, 90, *PAYLOAD, 195, 101, 57, 54])
PAYLOAD_ONE_STR_HEADER = bytes([0, 0, 0, 61, 0, 0, 0, 32, 7, 253, 131, 150, 12, *b"content-type", 7, 0, 16,
                                *b"application/json", *PAYLOAD, 141, 156, 8, 177])


def test_the_encoder_writes_the_published_vectors():
    assert eventstream.message([], b"") == EMPTY_MESSAGE
    assert eventstream.message([], PAYLOAD) == PAYLOAD_NO_HEADERS
    assert eventstream.message([("content-type", "application/json")], PAYLOAD) == PAYLOAD_ONE_STR_HEADER


def test_the_gateway_decodes_what_the_mock_writes_cut_anywhere():
    body = msgspec.json.encode({"delta": {"text": "héllo"}})
    stream = (eventstream.event("contentBlockDelta", body)
              + eventstream.exception("throttlingException", b'{"message":"slow down"}'))
    for cut in range(1, len(stream)):
        decoder = gateway_eventstream.EventStreamDecoder()
        messages = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert [m.headers for m in messages] == [
            {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"},
            {":exception-type": "throttlingException", ":content-type": "application/json",
             ":message-type": "exception"},
        ]
        assert messages[0].payload == body
