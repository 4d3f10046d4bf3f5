"""A guardrail run outside any request (``gateway.guardrails.direct``): what it judges for each body form, the same
results as a config item running the same guardrail, the rewritten field of a redaction, and bodies refused with the
field they name."""

from __future__ import annotations

import json

import msgspec
import pytest

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.guardrails import GuardrailRequest, GuardrailRunner
from gateway.guardrails.direct import INLINE, answer, inline_item, parse_check, parse_inline
from gateway.http.errors import InvalidRequest
from gateway.settings import Settings

PII = {"checks": [{"id": "default.pii", "parameters": {"redact": True}}]}
SHORT = {"checks": [{"id": "default.wordCount", "parameters": {"maxWords": 3}}], "deny": True}


def body(**fields) -> bytes:
    return msgspec.json.encode(fields)


def subject_of(check):
    return check.subject({"team": "a"}, (), "ws")


@pytest.mark.parametrize(("fields", "phase", "text"), [
    ({"text": "just this"}, "before", "just this"),
    ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "u"}]}]},
     "before", "u"),
    ({"stage": "output", "text": "an answer"}, "after", "an answer"),
    ({"stage": "output", "response": {"choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}]}},
     "after", "a\nb"),
])
def test_each_form_is_judged_as_the_request_path_reads_it(fields, phase, text):
    subject = subject_of(parse_check(body(**fields)))
    assert (subject.phase, subject.text, subject.request.endpoint) == (phase, text, "chat")
    assert subject.request.metadata == {"team": "a"} and subject.request.workspace == "ws"


def test_text_is_judged_as_a_chat_request_of_one_user_message():
    subject = subject_of(parse_check(body(text="hi", model="m")))
    assert subject.request.body == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert subject.request.model == "m"


async def test_an_inline_guardrail_gives_what_a_config_item_gives():
    runner = GuardrailRunner(Settings())
    try:
        check, record = parse_inline(body(guardrail=SHORT, text="four words right here"), "ws", "org")
        outcome = await runner.run_phase((inline_item(record),), subject_of(check))
        item = {"id": INLINE, "deny": True, "default.wordCount": {"maxWords": 3}}
        config = ConfigParser(config_checks()).parse(json.dumps({"provider": "vendorA", "api_key": "sk",
                                                                 "input_guardrails": [item]}))
        request = GuardrailRequest({"messages": [{"role": "user", "content": "four words right here"}]}, "chat")
        expected = await runner.before(config, request)
    finally:
        await runner.close()
    got = msgspec.to_builtins(outcome.results)
    want = msgspec.to_builtins(expected.results)
    for results in (got, want):
        for result in results:
            result.pop("execution_time")
            for c in result["checks"]:
                c.pop("execution_time")
    assert got == want and (outcome.verdict, outcome.deny) == (False, True)
    assert answer(None, check, outcome, False).deny is True


@pytest.mark.parametrize(("fields", "rewritten"), [
    ({"text": "mail a@b.example"}, {"text": "mail [EMAIL]"}),
    ({"messages": [{"role": "user", "content": "ip 10.0.0.1"}]}, {"messages": [{"role": "user", "content":
                                                                                 "ip [IP_ADDRESS]"}]}),
    ({"stage": "output", "text": "mail a@b.example"}, {"text": "mail [EMAIL]"}),
    ({"stage": "output", "response": {"choices": [{"message": {"content": "a@b.example"}}]}},
     {"response": {"choices": [{"message": {"content": "[EMAIL]"}}]}}),
])
async def test_a_redaction_answers_the_field_that_was_sent_rewritten(fields, rewritten):
    runner = GuardrailRunner(Settings())
    try:
        check, record = parse_inline(body(guardrail=PII, **fields), "ws", "org")
        outcome = await runner.run_phase((inline_item(record),), subject_of(check))
    finally:
        await runner.close()
    assert answer(None, check, outcome, False).transformed == rewritten


@pytest.mark.parametrize(("raw", "param"), [
    (b"[]", "body"),
    (body(text="a", stage="later"), "stage"),
    (body(text="a", guardrail={"checks": [{"id": "default.wordCount", "parameters": {"maxWords": -1}}]}),
     "guardrail.checks[0].parameters.maxWords"),
    (body(text="a", guardrail={"checks": PII["checks"], "name": ""}), "guardrail.name"),
    (body(text="a", guardrail={"checks": PII["checks"], "colour": "red"}), "guardrail.colour"),
])
def test_a_bad_inline_body_names_the_field(raw, param):
    with pytest.raises(InvalidRequest) as refused:
        parse_inline(raw, "ws", "org")
    assert refused.value.param == param and param in refused.value.message
