"""JSON-RPC messages as the MCP endpoints read them: what a client gets for a body that is not one message, and the
2026-07-28 envelope taken off (and put on) for servers of the other era."""

from __future__ import annotations

import msgspec
import pytest

from gateway.mcp import wire


def test_a_body_that_is_not_json_is_a_parse_error_and_a_batch_is_refused_by_name():
    with pytest.raises(wire.RpcError) as bad:
        wire.decode(b"{not json")
    assert bad.value.code == wire.PARSE_ERROR and bad.value.status == 400
    with pytest.raises(wire.RpcError) as batch:
        wire.decode(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert batch.value.code == wire.INVALID_REQUEST and "batches" in batch.value.message
    with pytest.raises(wire.RpcError) as version:
        wire.decode(b'{"jsonrpc":"1.0","id":1,"method":"ping"}')
    assert "jsonrpc" in version.value.message


def test_requests_notifications_and_responses_are_told_apart():
    assert wire.decode(b'{"jsonrpc":"2.0","id":"a","method":"tools/list"}').is_request
    assert wire.decode(b'{"jsonrpc":"2.0","method":"notifications/initialized"}').is_notification
    assert wire.decode(b'{"jsonrpc":"2.0","id":3,"result":{}}').is_response
    with pytest.raises(wire.RpcError):
        wire.decode(b'{"jsonrpc":"2.0","id":3}')


def test_the_envelope_is_read_checked_and_moved_between_eras():
    params = {"name": "add", "_meta": {wire.VERSION_META: "2026-07-28", wire.CAPABILITIES_META: {},
                                       "progressToken": 7}}
    assert wire.envelope_version(params) == "2026-07-28"
    assert wire.envelope_version({"name": "add"}) is None
    with pytest.raises(wire.RpcError) as missing:
        wire.envelope_version({"_meta": {wire.VERSION_META: "2026-07-28"}})
    assert wire.CAPABILITIES_META in missing.value.message
    legacy = wire.without_envelope(params)
    assert legacy == {"name": "add", "_meta": {"progressToken": 7}}  # the progress token survives
    modern = wire.with_envelope({"name": "add", "_meta": {"progressToken": 7}})
    assert modern["_meta"][wire.VERSION_META] == wire.MODERN and modern["_meta"]["progressToken"] == 7


def test_errors_carry_the_request_id_and_the_status_the_sdks_expect():
    error = wire.RpcError(wire.METHOD_NOT_FOUND, "Method not found: x")
    assert error.status == 404
    doc = msgspec.json.decode(error.body("req-1"))
    assert doc == {"jsonrpc": "2.0", "id": "req-1", "error": {"code": -32601, "message": "Method not found: x"}}
    assert wire.RpcError(wire.INTERNAL_ERROR, "x").status == 200


def test_json_nested_past_the_decoders_depth_is_a_parse_error_not_a_crash():
    deep = b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001
    with pytest.raises(wire.RpcError) as nested:
        wire.decode(deep)
    assert nested.value.code == wire.PARSE_ERROR and nested.value.status == 400
