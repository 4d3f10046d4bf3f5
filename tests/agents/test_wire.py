"""A2A requests and answers as the relay reads them (gateway/agents/wire.py): what is refused before an agent sees
it, and which task a request or an answer names in either protocol revision."""

from __future__ import annotations

import pytest

from gateway.agents import wire


@pytest.mark.parametrize(("body", "code", "says"), [
    (b"{", wire.PARSE_ERROR, "not valid JSON"),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]', wire.INVALID_REQUEST, "batches"),
    (b'{"jsonrpc": "2.1", "id": 1, "method": "GetTask"}', wire.INVALID_REQUEST, "jsonrpc"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": ""}', wire.INVALID_REQUEST, "method"),
    (b'{"jsonrpc": "2.0", "method": "GetTask"}', wire.INVALID_REQUEST, "id"),
    (b'{"jsonrpc": "2.0", "id": true, "method": "GetTask"}', wire.INVALID_REQUEST, "id"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": "x"}', wire.INVALID_PARAMS, "params"),
])
def test_a_request_that_is_not_one_json_rpc_call_is_refused_naming_what(body, code, says):
    with pytest.raises(wire.RpcError) as refused:
        wire.decode(body)
    assert refused.value.code == code and says in refused.value.message


def test_the_task_a_request_names():
    get = wire.decode(b'{"jsonrpc": "2.0", "id": "a", "method": "tasks/get", "params": {"id": "t1"}}')
    more = wire.decode(b'{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", '
                       b'"params": {"message": {"taskId": "t2", "parts": []}}}')
    fresh = wire.decode(b'{"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {}}}')
    assert (wire.task_of_request(get), wire.task_of_request(more), wire.task_of_request(fresh)) == ("t1", "t2", None)


@pytest.mark.parametrize(("result", "task"), [
    ({"task": {"id": "t1", "status": {}}}, "t1"),  # 1.0 SendMessage
    ({"message": {"messageId": "m", "taskId": "t2", "parts": []}}, "t2"),
    ({"message": {"messageId": "m", "parts": []}}, None),
    ({"statusUpdate": {"taskId": "t3"}}, "t3"), ({"artifactUpdate": {"taskId": "t4"}}, "t4"),
    ({"id": "t5", "status": {"state": "TASK_STATE_WORKING"}}, "t5"),  # 1.0 GetTask
    ({"kind": "task", "id": "t6", "status": {}}, "t6"), ({"kind": "status-update", "taskId": "t7"}, "t7"),  # 0.3
    ({"kind": "message", "messageId": "m", "parts": []}, None), ("text", None),
])
def test_the_task_an_answer_names_in_either_revision(result, task):
    assert wire.task_of_result(result) == task


def test_only_a_json_rpc_response_is_read_as_one():
    assert wire.head_of(b'{"jsonrpc": "2.0", "id": 1, "result": {}}') is not None
    assert wire.error_code(wire.head_of(b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32001}}')) == -32001
    for data in (b'{"hello": 1}', b'{"jsonrpc": "2.0", "id": 1}', b"[1]", b"<html>"):
        assert wire.head_of(data) is None
