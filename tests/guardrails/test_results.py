"""hook_results on answers and streams, statuses, and the 446 error envelope."""

from __future__ import annotations

import json

import pytest

from gateway.guardrails.results import (
    CheckResult,
    HookResult,
    HookResults,
    attach_hook_results,
    attach_hook_results_to_event,
)
from gateway.http.errors import GuardrailDenied


def results(verdict: bool = True, deny: bool = False) -> HookResults:
    check = CheckResult("default.contains", verdict, "why", 0.01)
    return HookResults(before_request_hooks=[HookResult("h1", "guardrail", verdict, deny, 0.01, [check])])


@pytest.mark.parametrize(("verdict", "deny", "status"), [(True, False, 200), (False, False, 246), (False, True, 446),
                                                         (True, True, 446)])
def test_status(verdict, deny, status):
    assert results(verdict, deny).status == status


def test_no_hooks_ran():
    assert not HookResults().ran and HookResults().status == 200


def test_attach_to_a_json_answer_keeps_its_fields():
    body = attach_hook_results(b'{"id": "c1", "choices": []}\n', results())
    doc = json.loads(body)
    assert doc["id"] == "c1" and doc["choices"] == []
    assert doc["hook_results"]["before_request_hooks"][0]["checks"][0]["id"] == "default.contains"
    assert doc["hook_results"]["after_request_hooks"] == []
    assert json.loads(attach_hook_results(b"{}", results()))["hook_results"]
    with pytest.raises(ValueError):
        attach_hook_results(b"[1]", results())


def test_attach_to_the_first_stream_chunk():
    chunk = b': keep-alive\n\ndata: {"id":"c1","choices":[{"delta":{"content":"Hi"}}]}\n\ndata: {"id":"c1"}\n\n'
    out = attach_hook_results_to_event(chunk, results())
    events = [line[6:] for line in out.split(b"\n") if line.startswith(b"data: ")]
    first, second = json.loads(events[0]), json.loads(events[1])
    assert first["choices"][0]["delta"]["content"] == "Hi" and "hook_results" in first
    assert "hook_results" not in second
    assert out.startswith(b": keep-alive\n\n")
    bare = attach_hook_results_to_event(b"data: [DONE]\n\n", results())
    assert bare.startswith(b'data: {"hook_results":') and bare.endswith(b"data: [DONE]\n\n")


def test_the_446_error_is_the_envelope_plus_hook_results():
    error = results(False, True).denied()
    assert isinstance(error, GuardrailDenied) and error.status == 446
    doc = json.loads(error.body())
    assert set(doc) == {"error", "hook_results"}
    assert set(doc["error"]) == {"message", "type", "param", "code"}
    assert doc["error"]["code"] == "guardrail_denied"
    assert "'h1'" in doc["error"]["message"] and "default.contains: why" in doc["error"]["message"]
