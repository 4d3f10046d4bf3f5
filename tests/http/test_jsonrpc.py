"""The JSON-RPC error both JSON-RPC endpoints answer with: its body, its status, a gateway error as one, a body read."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http import jsonrpc
from gateway.http.errors import NotFound, RateLimited, ServiceUnavailable


def test_an_error_body_carries_the_id_code_message_and_data_only_when_there_is_data():
    assert msgspec.json.decode(jsonrpc.RpcError(jsonrpc.INVALID_PARAMS, "params must be an object").body(7)) == {
        "jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "params must be an object"}}
    assert msgspec.json.decode(jsonrpc.error_body(None, -32010, "denied", {"guardrail": "g"})) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32010, "message": "denied", "data": {"guardrail": "g"}}}


def test_the_status_is_200_unless_given_or_mapped_by_the_protocol():
    class Mapped(jsonrpc.RpcError):
        STATUS = {jsonrpc.METHOD_NOT_FOUND: 404}

    assert jsonrpc.RpcError(jsonrpc.METHOD_NOT_FOUND, "x").status == 200
    assert jsonrpc.RpcError(jsonrpc.INVALID_REQUEST, "x", status=401).status == 401
    assert Mapped(jsonrpc.METHOD_NOT_FOUND, "x").status == 404
    assert Mapped(jsonrpc.METHOD_NOT_FOUND, "x", status=200).status == 200


def test_a_gateway_error_keeps_its_status_message_and_fields_in_the_protocols_error():
    class Mapped(jsonrpc.RpcError):
        STATUS = {jsonrpc.INVALID_REQUEST: 400}

    missing = Mapped.of(NotFound("no agent 'x' in this key's workspace", param="slug"))
    assert type(missing) is Mapped and missing.status == 404 and missing.code == jsonrpc.INVALID_REQUEST
    assert missing.message == "no agent 'x' in this key's workspace"
    assert missing.data == {"status": 404, "type": "not_found_error", "param": "slug", "code": "not_found"}
    assert jsonrpc.RpcError.of(RateLimited("slow down")).status == 429
    down = jsonrpc.RpcError.of(ServiceUnavailable("the state store is unreachable"))
    assert down.status == 503 and down.code == jsonrpc.INTERNAL_ERROR


class _Object(msgspec.Struct):
    jsonrpc: object = None


_decoder = msgspec.json.Decoder(_Object)


@pytest.mark.parametrize(("body", "code", "words"), [
    (b"{nope", jsonrpc.PARSE_ERROR, "the body is not valid JSON: "),
    (b'{"jsonrpc": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", jsonrpc.PARSE_ERROR, "nested too deeply"),
    (b'[{"jsonrpc": "2.0"}]', jsonrpc.INVALID_REQUEST, "no batches here"),
    (b"7", jsonrpc.INVALID_REQUEST, "the body is not a test object: expected `object`, got `int`"),
])
def test_a_body_that_is_not_one_object_is_the_error_saying_why(body, code, words):
    with pytest.raises(jsonrpc.RpcError) as refused:
        jsonrpc.decode_one(_decoder, body, "a test object", "no batches here")
    assert refused.value.code == code and words in refused.value.message, refused.value.message
    assert jsonrpc.decode_one(_decoder, b'{"jsonrpc": "2.0"}', "a test object", "no").jsonrpc == "2.0"
