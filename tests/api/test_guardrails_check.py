"""``POST /v1/guardrails/{id}/check`` and ``POST /v1/guardrails/check`` (issue 37, docs/guardrails.md "Checking text
directly"): a saved or inline guardrail run on a text, a chat request's messages or a chat completion outside any
request, answering what the same guardrail reports on a chat request through the gateway (the mock provider behind
it); webhooks, redaction, the scope, workspaces, bad bodies, the request record and rate limits.

Each test makes a workspace of its own (an admin key, which holds ``guardrails.invoke`` as every admin key does), so
no test sees another's guardrails, records or policies."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.controlplane import api, create_key
from tests.support.poll import wait_for, wait_logs
from tests.support.webhook import WebhookServer

SHORT = {"name": "short", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 3}}], "deny": True,
         "on_fail": {"feedback": {"value": -1, "weight": 2}}}
NO_HELLO = {"name": "no hello", "checks": [{"id": "default.contains",
                                             "parameters": {"words": ["Hello"], "operator": "none"}}]}
REDACT = {"checks": [{"id": "default.pii", "parameters": {"redact": True}}]}
LONG = "four words right here"


class Tenant:
    """A workspace of its own and its admin key."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        record = create_key(gateway, role="admin")
        self.workspace: str = record["workspace_id"]
        self.key: str = record["key"]

    def call(self, method: str, path: str, body: Any = None, key: str | None = None, **headers: str) -> Any:
        return api(self.gateway, method, path, body, key or self.key, **headers)

    def saved(self, body: dict) -> str:
        created = self.call("POST", "/v1/guardrails", body)
        assert created.status == 201, created.text
        return str(created.json()["id"])

    def check(self, guardrail_id: str, body: Any, **headers: str) -> Any:
        return self.call("POST", f"/v1/guardrails/{guardrail_id}/check", body, **headers)

    def inline(self, guardrail: Any, body: dict, **headers: str) -> Any:
        return self.call("POST", "/v1/guardrails/check", {"guardrail": guardrail, **body}, **headers)

    def chat(self, base: str, text: str, **config: Any) -> Any:
        cfg = {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1", **config}
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
        return self.call("POST", "/v1/chat/completions", body, **{"x-gateway-config": json.dumps(cfg)})


@pytest.fixture
def tenant(gateway) -> Tenant:
    return Tenant(gateway)


@pytest.fixture(scope="module")
def webhook():
    server = WebhookServer().start()
    yield server
    server.stop()


def untimed(results: dict) -> dict:
    """``hook_results`` without the execution times (the only fields two runs of a check may differ in)."""
    out: dict = {}
    for phase, hooks in results.items():
        out[phase] = [{**{k: v for k, v in hook.items() if k != "execution_time"},
                       "checks": [{k: v for k, v in c.items() if k != "execution_time"} for c in hook["checks"]]}
                      for hook in hooks]
    return out


def ok(resp: Any) -> dict:
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert doc["object"] == "guardrail.check"
    return dict(doc)


def refused(resp: Any, status: int, param: str | None) -> dict:
    assert resp.status == status, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and error["message"], error
    return dict(error)


# --- the same verdict as a request's ------------------------------------------------------------------------------


def test_a_saved_guardrail_denies_and_allows_as_on_a_chat_request(tenant, mock):
    gid = tenant.saved(SHORT)
    base = mock.scenario()
    denied_chat = tenant.chat(base, LONG, input_guardrails=[gid])
    assert denied_chat.status == 446, denied_chat.text
    denied = ok(tenant.check(gid, {"text": LONG}))
    assert (denied["guardrail_id"], denied["stage"], denied["verdict"], denied["deny"]) == (gid, "input", False, True)
    assert untimed(denied["hook_results"]) == untimed(denied_chat.json()["hook_results"])
    hook = denied["hook_results"]["before_request_hooks"][0]
    assert hook["id"] == gid and hook["feedback"] == {"value": -1, "weight": 2}
    assert hook["checks"][0]["id"] == "default.wordCount" and hook["checks"][0]["data"] is not None
    assert denied["transformed"] is None

    allowed_chat = tenant.chat(base, "two words", input_guardrails=[gid])
    assert allowed_chat.status == 200, allowed_chat.text
    allowed = ok(tenant.check(gid, {"messages": [{"role": "system", "content": "be brief"},
                                                 {"role": "user", "content": "two words"}], "model": "gpt-4o-mini"}))
    assert (allowed["verdict"], allowed["deny"]) == (True, False)
    assert untimed(allowed["hook_results"]) == untimed(allowed_chat.json()["hook_results"])


def test_an_output_check_reads_a_chat_completion_as_the_request_path_does(tenant, mock):
    gid = tenant.saved(NO_HELLO)
    answered = tenant.chat(mock.scenario([{"reply": "Hello there"}]), "hi", output_guardrails=[gid])
    assert answered.status == 246, answered.text
    completion = answered.json()
    flagged = ok(tenant.check(gid, {"stage": "output", "response": completion,
                                    "messages": [{"role": "user", "content": "hi"}]}))
    assert (flagged["stage"], flagged["verdict"], flagged["deny"]) == ("output", False, False)
    assert untimed(flagged["hook_results"]) == untimed(completion["hook_results"])
    assert flagged["hook_results"]["before_request_hooks"] == []
    passed = ok(tenant.check(gid, {"stage": "output", "text": "Goodbye"}))
    assert passed["verdict"] is True and passed["hook_results"]["after_request_hooks"][0]["checks"][0]["verdict"]


def test_an_inline_guardrail_runs_as_a_saved_one(tenant):
    guardrail = {"checks": [{"id": "default.contains", "parameters": {"words": ["password"], "operator": "none"}}],
                 "deny": True}
    denied = ok(tenant.inline(guardrail, {"text": "my password is hunter2"}))
    assert (denied["guardrail_id"], denied["verdict"], denied["deny"]) == (None, False, True)
    hook = denied["hook_results"]["before_request_hooks"][0]
    assert (hook["id"], hook["type"], hook["async"]) == ("inline", "guardrail", False)
    assert ok(tenant.inline(guardrail, {"text": "nothing secret"}))["verdict"] is True
    flagged = ok(tenant.inline({**guardrail, "deny": False, "async": True}, {"text": "my password"}))
    assert (flagged["verdict"], flagged["deny"]) == (False, False)  # an async guardrail is awaited, marked async
    assert flagged["hook_results"]["before_request_hooks"][0]["async"] is True


# --- webhooks and redaction -------------------------------------------------------------------------------------


def test_a_webhook_check_is_called_as_from_a_request(tenant, webhook):
    guardrail = {"checks": [{"id": "default.webhook", "parameters": {
        "webhookURL": webhook.url + "/verdict/false", "headers": {"Authorization": "Bearer hook-secret"}}}]}
    answer = ok(tenant.inline(guardrail, {"text": "judge me"}, **{"x-gateway-metadata": '{"team": "a"}'}))
    check = answer["hook_results"]["before_request_hooks"][0]["checks"][0]
    assert (check["id"], check["verdict"], check["explanation"]) == ("default.webhook", False, "the webhook said False")
    path, sent = webhook.received[-1]
    assert path == "/verdict/false" and sent["eventType"] == "beforeRequestHook"
    assert sent["request"]["text"] == "judge me" and sent["request"]["endpoint"] == "chat"
    assert sent["metadata"] == {"team": "a"}
    assert webhook.received_headers[-1][1]["authorization"] == "Bearer hook-secret"
    saved = tenant.saved({"name": "hook", **guardrail})
    after = ok(tenant.check(saved, {"stage": "output", "text": "an answer"}))
    assert after["hook_results"]["after_request_hooks"][0]["verdict"] is False
    path, sent = webhook.received[-1]
    assert sent["eventType"] == "afterRequestHook" and sent["response"]["text"] == "an answer"
    assert "hook-secret" not in json.dumps(after)


def test_a_webhook_that_answers_late_or_badly_fails_the_check_as_in_a_request(tenant, webhook):
    for path, timeout, words in (("/slow/3000", 300, "did not answer within 300 ms"), ("/status/500", 3000, "500")):
        guardrail = {"checks": [{"id": "default.webhook", "parameters": {"webhookURL": webhook.url + path,
                                                                         "timeout": timeout}}], "deny": True}
        answer = ok(tenant.inline(guardrail, {"text": "judge me"}))
        check = answer["hook_results"]["before_request_hooks"][0]["checks"][0]
        assert (answer["verdict"], answer["deny"], check["verdict"]) == (False, True, False), answer
        assert words in check["explanation"], check


def test_a_redacting_check_answers_the_rewritten_text(tenant):
    answer = ok(tenant.inline(REDACT, {"text": "mail me at someone@example.com"}))
    assert answer["transformed"] == {"text": "mail me at [EMAIL]"}
    assert answer["verdict"] is True and answer["hook_results"]["before_request_hooks"][0]["transformed"] is True
    messages = [{"role": "system", "content": "ip 10.1.2.3"}, {"role": "user", "content": "a@b.example here"}]
    rewritten = ok(tenant.inline(REDACT, {"messages": messages}))["transformed"]
    assert rewritten == {"messages": [{"role": "system", "content": "ip [IP_ADDRESS]"},
                                      {"role": "user", "content": "[EMAIL] here"}]}
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "call +1 415 555 0100"}}]}
    out = ok(tenant.inline(REDACT, {"stage": "output", "response": response}))["transformed"]
    assert out["response"]["choices"][0]["message"]["content"] == "call [PHONE]"
    assert ok(tenant.inline(REDACT, {"text": "nothing personal"}))["transformed"] is None


# --- who may check what ---------------------------------------------------------------------------------------------


def test_the_scope_is_guardrails_invoke_for_any_role(tenant):
    gid = tenant.saved(SHORT)
    member = create_key(tenant.gateway, role="member", workspace=tenant.workspace, key=tenant.key,
                        scopes=["inference"])
    error = refused(tenant.check(gid, {"text": "hi"}, key=member["key"]), 403, "x-gateway-api-key")
    assert error["code"] == "missing_scope" and "guardrails.invoke" in error["message"]
    refused(tenant.inline(REDACT, {"text": "hi"}, key=member["key"]), 403, "x-gateway-api-key")
    invoker = create_key(tenant.gateway, role="member", workspace=tenant.workspace, key=tenant.key,
                         scopes=["guardrails.invoke"])
    assert "guardrails.invoke" in create_key(tenant.gateway, role="member", workspace=tenant.workspace,
                                             key=tenant.key)["scopes"]  # a member's default
    assert ok(tenant.check(gid, {"text": "hi"}, key=invoker["key"]))["verdict"] is True
    assert ok(tenant.inline(REDACT, {"text": "hi"}, key=invoker["key"]))["verdict"] is True
    assert tenant.call("GET", f"/v1/guardrails/{gid}", key=invoker["key"]).status == 403  # reading is admin's


def test_another_workspaces_guardrail_is_not_found(tenant, gateway):
    other = Tenant(gateway)
    theirs = other.saved(SHORT)
    refused(tenant.check(theirs, {"text": "hi"}), 404, "guardrail_id")
    refused(tenant.check("gr_nosuch", {"text": "hi"}), 404, "guardrail_id")
    refused(tenant.call("POST", f"/v1/guardrails/check?workspace_id={other.workspace}", {"guardrail": REDACT,
                                                                                         "text": "hi"}),
            404, "workspace_id")
    assert ok(other.check(theirs, {"text": "hi"}))["verdict"] is True


def test_check_is_no_guardrail_id(tenant):
    for method in ("GET", "PUT", "DELETE"):
        resp = tenant.call(method, "/v1/guardrails/check", {} if method == "PUT" else None)
        assert resp.status == 405 and resp.headers["allow"] == "POST", (method, resp.text)
    assert ok(tenant.call("POST", "/v1/guardrails/check/", {"guardrail": REDACT, "text": "hi"}))["verdict"]
    assert tenant.saved(SHORT).startswith("gr_")  # ids are made by the gateway: none is "check"


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "param"), [
    ({"text": 5}, "text"),
    ({}, "text"),
    ({"text": "a", "messages": [{"role": "user", "content": "b"}]}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "b"}]}, "messages[0].role"),
    ({"stage": "middle", "text": "a"}, "stage"),
    ({"text": "a", "response": {"choices": []}}, "response"),
    ({"stage": "output", "response": {"text": "no choices"}}, "response.choices"),
    ({"stage": "output", "text": "a", "response": {"choices": []}}, "response"),
    ({"text": "a", "colour": "red"}, "colour"),
    ({"text": "a", "model": 3}, "model"),
])
def test_a_bad_check_body_is_a_400_naming_the_field(tenant, body, param):
    gid = tenant.saved(SHORT)
    error = refused(tenant.check(gid, body), 400, param)
    assert param in error["message"]
    refused(tenant.inline(REDACT, body), 400, param)


@pytest.mark.parametrize(("guardrail", "param"), [
    (None, "guardrail"),
    ("gr_123", "guardrail"),
    ({"checks": [{"id": "default.nope", "parameters": {}}]}, "guardrail.checks[0].id"),
    ({"checks": [{"id": "default.regexMatch", "parameters": {"rule": "(a+)+"}}]},
     "guardrail.checks[0].parameters.rule"),
    ({"checks": []}, "guardrail.checks"),
    ({"checks": REDACT["checks"], "deny": "yes"}, "guardrail.deny"),
    ({"checks": REDACT["checks"], "async": True, "deny": True}, "guardrail.async"),
    ({"checks": REDACT["checks"], "workspace_id": "elsewhere"}, "guardrail.workspace_id"),
])
def test_a_bad_inline_guardrail_is_a_400_naming_its_field(tenant, guardrail, param):
    error = refused(tenant.inline(guardrail, {"text": "a"}), 400, param)
    assert param in error["message"]


def test_bodies_that_are_not_json_objects_or_too_large_are_refused(tenant):
    gid = tenant.saved(SHORT)
    for path in (f"/v1/guardrails/{gid}/check", "/v1/guardrails/check"):
        for raw in (b"not json", b"[1]", b'{"text": "\xff"}', b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
            refused(tenant.call("POST", path, raw), 400, "body")
        too_large = tenant.call("POST", path, b"{}", **{"content-length": str(64 * 1024 * 1024)})
        assert too_large.status == 413, too_large.text


# --- logged and limited ---------------------------------------------------------------------------------------------


def test_each_check_is_a_request_record(tenant):
    gid = tenant.saved(SHORT)
    checked = tenant.check(gid, {"text": LONG}, **{"x-gateway-metadata": '{"run": "records"}'})
    answer = ok(checked)
    trace = checked.headers["x-gateway-trace-id"]
    record = wait_logs(tenant.gateway, trace, key=tenant.key)[0]
    assert (record["workspace"], record["endpoint"], record["provider"], record["model"], record["status"]) == (
        tenant.workspace, "guardrails.check", "guardrails", gid, 200)
    metadata = record["metadata"]
    assert metadata == {"run": "records", "guardrail_id": gid, "guardrail_stage": "input",
                        "guardrail_verdict": False, "guardrail_deny": True}
    assert record["hook_results"]["before_request_hooks"] == answer["hook_results"]["before_request_hooks"]
    assert record["hook_results"]["feedback"] == [{"hook_id": gid, "verdict": False, "value": -1, "weight": 2,
                                                   "metadata": None}]
    bad = tenant.inline({"checks": []}, {"text": "a"})
    failed = wait_logs(tenant.gateway, bad.headers["x-gateway-trace-id"], key=tenant.key)[0]
    assert (failed["model"], failed["status"]) == ("inline", 400) and "guardrail.checks" in failed["error"]
    by_model = tenant.call("GET", f"/v1/logs?provider=guardrails&model={gid}")
    assert by_model.status == 200, by_model.text
    assert [r["trace_id"] for r in by_model.json()["data"]] == [trace]


def test_a_rate_limit_refuses_the_check_past_it(tenant):
    gid = tenant.saved(SHORT)
    created = tenant.call("POST", "/v1/policies/rate-limits", {
        "name": "two checks a minute", "conditions": [{"key": "model", "value": gid}],
        "group_by": [{"key": "model"}], "type": "requests", "unit": "rpm", "value": 2})
    assert created.status == 200, created.text
    left_in_minute = 60 - time.time() % 60
    if left_in_minute < 5:  # the windows are clock minutes: the three checks go in one
        time.sleep(left_in_minute + 0.1)
    for _ in range(2):
        ok(tenant.check(gid, {"text": "hi"}))
    spent = tenant.check(gid, {"text": "hi"})
    assert spent.status == 429, spent.text
    assert "two checks a minute" in spent.json()["error"]["message"] and spent.headers.get("retry-after")
    assert ok(tenant.inline(REDACT, {"text": "hi"}))["verdict"] is True  # another model: not limited
    record = wait_logs(tenant.gateway, spent.headers["x-gateway-trace-id"], key=tenant.key)[0]
    assert (record["model"], record["status"]) == (gid, 429)


def test_checks_show_in_the_aggregates_and_the_metrics(tenant):
    gid = tenant.saved(SHORT)
    for text in ("hi", LONG):
        ok(tenant.check(gid, {"text": text}))

    def grouped() -> dict | None:
        resp = tenant.call("GET", f"/v1/logs/aggregates?window=15m&provider=guardrails&model={gid}")
        assert resp.status == 200, resp.text
        groups = {(g["provider"], g["model"]): g for g in resp.json()["groups"]}
        return groups.get(("guardrails", gid)) if resp.json()["totals"]["requests"] >= 2 else None

    assert wait_for(grouped, 8.0, 0.1)["by_status"] == {"200": 2}
    wanted = (f'gateway_requests_total{{cache_status="DISABLED",endpoint="guardrails.check",model="{gid}",'
              f'provider="guardrails",status="200"}} 2.0')

    def counted() -> bool:
        answer = api(tenant.gateway, "GET", "/metrics")
        assert answer.status == 200, answer.text
        return wanted in answer.text.splitlines()

    wait_for(counted, 8.0, 0.2)
