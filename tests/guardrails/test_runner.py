"""The hook runner's outcomes: deny, failed without deny, async, all passing; saved guardrails; the worker pool."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.guardrails import GuardrailAnswer, GuardrailRequest, GuardrailRunner, HookResults
from gateway.guardrails.saved import new_guardrail, parse_create
from gateway.http.errors import InvalidRequest
from gateway.settings import Settings

KEY = {"provider": "vendorA", "api_key": "sk"}


def config(**items):
    return ConfigParser(config_checks()).parse(json.dumps({**KEY, **items}))


def chat(text: str, **kw) -> GuardrailRequest:
    return GuardrailRequest({"model": "m", "messages": [{"role": "user", "content": text}]}, "chat", **kw)


def reply(text: str) -> GuardrailAnswer:
    return GuardrailAnswer({"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})


@pytest.fixture
async def runner():
    r = GuardrailRunner(Settings())
    yield r
    await r.close()


WORDS = {"default.wordCount": {"minWords": 1, "maxWords": 3}}


async def test_a_failed_deny_guardrail_denies_with_446_and_hook_results(runner):
    cfg = config(input_guardrails=[{"id": "short", **WORDS, "deny": True}])
    outcome = await runner.before(cfg, chat("one two three four five"))
    assert outcome.deny and not outcome.verdict
    results = HookResults()
    results.add(outcome)
    assert results.status == 446
    error = results.denied()
    body = json.loads(error.body())
    assert error.status == 446
    assert body["error"]["type"] == "hooks_failed"
    assert "short" in body["error"]["message"] and "default.wordCount" in body["error"]["message"]
    hook = body["hook_results"]["before_request_hooks"][0]
    assert hook["id"] == "short" and hook["verdict"] is False and hook["deny"] is True
    check = hook["checks"][0]
    assert check["id"] == "default.wordCount" and check["verdict"] is False
    assert check["explanation"] == "5 words, outside 1..3"
    assert isinstance(check["execution_time"], float)
    assert body["hook_results"]["after_request_hooks"] == []


async def test_a_failed_guardrail_without_deny_goes_on_with_246(runner):
    cfg = config(input_guardrails=[WORDS], output_guardrails=[{"default.contains": {"words": ["sorry"],
                                                                                    "operator": "none"}}])
    before = await runner.before(cfg, chat("one two three four five"))
    after = await runner.after(cfg, chat("x"), reply("All good."))
    assert not before.deny and not before.verdict
    assert after.verdict
    results = HookResults()
    results.add(before)
    results.add(after)
    assert results.status == 246
    assert [h.id for h in results.before_request_hooks] == ["input_guardrails[0]"]
    assert [h.verdict for h in results.after_request_hooks] == [True]


async def test_all_passing_is_200_with_hook_results_and_nothing_configured_runs_nothing(runner):
    cfg = config(before_request_hooks=[{"id": "h", "checks": [{"id": "default.wordCount",
                                                               "parameters": {"maxWords": 9}}]}])
    outcome = await runner.before(cfg, chat("fine"))
    results = HookResults()
    results.add(outcome)
    assert results.status == 200 and results.ran
    assert not GuardrailRunner.has_before(config()) and GuardrailRunner.has_before(cfg)
    assert not GuardrailRunner.has_after(cfg)
    empty = await runner.after(cfg, chat("x"), reply("y"))
    assert empty.results == [] and empty.verdict


async def test_output_guardrail_on_fail_deny_denies_the_answer(runner):
    cfg = config(output_guardrails=[{"id": "json", "default.jsonSchema": {"schema": {"type": "object"}},
                                     "on_fail": {"deny": True, "feedback": {"value": -1, "weight": 1}},
                                     "on_success": {"feedback": {"value": 1}}}])
    bad = await runner.after(cfg, chat("x"), reply("not json"))
    assert bad.deny and bad.denied_by.id == "json"
    assert [(f.hook_id, f.verdict, f.value, f.weight) for f in bad.feedback] == [("json", False, -1, 1)]
    good = await runner.after(cfg, chat("x"), reply('{"a": 1}'))
    assert not good.deny and [(f.verdict, f.value) for f in good.feedback] == [(True, 1)]
    assert good.results[0].feedback.value == 1


async def test_on_success_deny_denies_a_passing_hook(runner):
    cfg = config(before_request_hooks=[{"id": "block-sql", "checks": [
        {"id": "default.containsCode", "parameters": {"format": "sql"}}], "on_success": {"deny": True}}])
    outcome = await runner.before(cfg, chat("```sql\nDROP TABLE users;\n```"))
    assert outcome.deny and outcome.verdict
    results = HookResults()
    results.add(outcome)
    assert "denies on success" in results.denied().message
    assert not (await runner.before(cfg, chat("hello"))).deny


@pytest.mark.serial  # a time bound that a busy machine could break
async def test_async_items_never_delay_the_answer_and_report_in_the_background(hook_server, loopback_client):
    seen: list = []
    runner = GuardrailRunner(Settings(), loopback_client, on_background=lambda phase, result: seen.append(result))
    cfg = config(after_request_hooks=[{"id": "slow-audit", "async": True, "checks": [
        {"id": "default.webhook", "parameters": {"webhookURL": f"{hook_server.url}/slow", "timeout": 300}}]}],
        output_guardrails=[{"id": "quick", "async": True, **WORDS}])
    started = time.monotonic()
    outcome = await runner.after(cfg, chat("x"), reply("one two three four"))
    assert time.monotonic() - started < 0.25  # the webhook takes 300 ms to time out; nothing waited for it
    assert outcome.results == [] and outcome.verdict and not outcome.deny
    for _ in range(100):  # bounded: 5 s
        if len(seen) == 2:
            break
        await asyncio.sleep(0.05)
    by_id = {r.id: r for r in seen}
    assert by_id["quick"].verdict is False and by_id["quick"].async_ is True
    assert by_id["slow-audit"].verdict is False
    assert "within 300 ms" in by_id["slow-audit"].checks[0].explanation
    await runner.close()



async def test_async_items_beyond_the_bound_are_dropped_with_a_warning_and_the_answer_goes_on(caplog):
    seen: list = []
    runner = GuardrailRunner(Settings(guardrail_async_max=1), on_background=lambda phase, result: seen.append(result))
    cfg = config(input_guardrails=[{"id": "first", "async": True, **WORDS}, {"id": "second", "async": True, **WORDS}])
    outcome = await runner.before(cfg, chat("one two"))
    assert outcome.verdict and not outcome.deny and outcome.results == []
    for _ in range(100):  # bounded: 5 s
        if seen:
            break
        await asyncio.sleep(0.05)
    await runner.close()
    assert [result.id for result in seen] == ["first"]  # GATEWAY_GUARDRAIL_ASYNC_MAX=1: the second never ran
    assert "async guardrail second dropped: 1 already running" in caplog.text

async def test_pii_redaction_rewrites_the_request_body_and_the_answer(runner):
    cfg = config(input_guardrails=[{"default.pii": {"redact": True}}], output_guardrails=[{"default.pii": {
        "redact": True, "categories": ["email"]}}])
    request = GuardrailRequest({"model": "m", "messages": [
        {"role": "system", "content": "Operator: ops@example.com"},
        {"role": "user", "content": "My card is 4111 1111 1111 1111"}]}, "chat")
    before = await runner.before(cfg, request)
    assert before.verdict and before.results[0].transformed
    assert before.body["messages"][0]["content"] == "Operator: [EMAIL]"
    assert before.body["messages"][1]["content"] == "My card is [CREDIT_CARD]"
    assert request.body["messages"][1]["content"] == "My card is 4111 1111 1111 1111"  # the original is untouched
    after = await runner.after(cfg, request, reply("Write to help@example.com"))
    assert after.body["choices"][0]["message"]["content"] == "Write to [EMAIL]"
    streamed = await runner.after(cfg, request, GuardrailAnswer(text="Write to help@example.com"))
    assert streamed.text == "Write to [EMAIL]" and streamed.body is None
    clean = await runner.before(cfg, chat("nothing here"))
    assert clean.body is None and not clean.transformed


async def test_large_inputs_run_in_the_pool_and_a_full_pool_fails_closed(monkeypatch):
    import threading

    from gateway.guardrails.checks.regex_match import RegexMatch

    threads: list[str] = []
    original = RegexMatch.run

    def recording(self, subject):
        threads.append(threading.current_thread().name)
        return original(self, subject)

    monkeypatch.setattr(RegexMatch, "run", recording)
    runner = GuardrailRunner(Settings(guardrail_workers=1, guardrail_queue=1))
    rule = {"default.regexMatch": {"rule": "ipsum"}}
    cfg = config(input_guardrails=[{"id": "a", **rule}, {"id": "b", **rule}])
    small = await runner.before(cfg, chat("lorem ipsum"))
    assert [h.verdict for h in small.results] == [True, True]
    assert threads == [threading.current_thread().name] * 2  # cheap: inline on the event loop
    threads.clear()
    outcome = await runner.before(cfg, chat("lorem ipsum " * 4000))  # 48 KiB: over the offload threshold
    verdicts = {h.id: h.checks[0] for h in outcome.results}
    assert verdicts["a"].verdict is True
    assert threads and threads[0].startswith("guardrail")
    assert verdicts["b"].verdict is False and "worker pool is full" in verdicts["b"].explanation
    await runner.close()


async def test_a_check_that_raises_fails_closed(runner, monkeypatch):
    from gateway.guardrails.checks.word_count import WordCount

    def broken(self, subject):
        raise RuntimeError("boom")

    monkeypatch.setattr(WordCount, "run", broken)
    outcome = await runner.before(config(input_guardrails=[WORDS]), chat("hi"))
    assert outcome.results[0].verdict is False
    assert "RuntimeError: boom" in outcome.results[0].checks[0].explanation


async def test_plans_are_compiled_once_per_config_object(runner):
    cfg = config(input_guardrails=[WORDS])
    assert runner.plan(cfg, "before") is runner.plan(cfg, "before")


async def test_saved_guardrails_are_resolved_by_id_with_the_items_overrides():
    record = new_guardrail(parse_create({"name": "pii", "checks": [{"id": "default.pii"}]}), "ws1",
                           guardrail_id="gr_pii")
    asked: list = []

    async def resolve(guardrail_id: str, workspace: str):
        asked.append((guardrail_id, workspace))
        return record if (guardrail_id, workspace) == ("gr_pii", "ws1") else None

    runner = GuardrailRunner(Settings(), resolve_saved=resolve)
    request = chat("mail a@example.com", workspace="ws1")
    plain = await runner.before(config(input_guardrails=["gr_pii"]), request)
    assert plain.results[0].id == "gr_pii" and not plain.verdict and not plain.deny
    denying = await runner.before(config(input_guardrails=[{"id": "gr_pii", "deny": True}]), request)
    assert denying.deny
    hook = await runner.before(config(before_request_hooks=[{"id": "gr_pii", "on_fail": {"deny": True}}]), request)
    assert hook.deny
    with pytest.raises(InvalidRequest) as info:
        await runner.before(config(input_guardrails=["ok", "gr_missing"]), request)
    assert info.value.param == "input_guardrails[0]"
    assert asked[-1] == ("ok", "ws1")
    await runner.close()


async def test_a_saved_id_without_a_resolver_is_a_400_naming_it(runner):
    with pytest.raises(InvalidRequest) as info:
        await runner.after(config(output_guardrails=["gr_x"]), chat("hi"), reply("x"))
    assert info.value.status == 400 and "gr_x" in info.value.message


async def test_async_results_go_to_the_log_by_default(runner, caplog):
    caplog.set_level("INFO", logger="gateway.guardrails")
    cfg = config(input_guardrails=[{"id": "audit", "async": True, **WORDS}])
    outcome = await runner.before(cfg, chat("one two three four five"))
    assert outcome.results == []
    for _ in range(100):  # bounded: 5 s
        if any("audit" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    line = next(r.getMessage() for r in caplog.records if "audit" in r.getMessage())
    assert "async before-request hook audit" in line and '"verdict":false' in line


async def test_a_phase_hands_back_its_async_items_as_tasks(runner):
    cfg = config(input_guardrails=[{"id": "audit", "async": True, **WORDS}, {"id": "sync", **WORDS}])
    outcome = await runner.before(cfg, chat("one two three four"))
    assert [r.id for r in outcome.results] == ["sync"]
    (task,) = outcome.background
    result = await task
    assert result.id == "audit" and result.async_ is True and result.verdict is False


async def test_after_may_change_says_when_a_stream_must_be_held(runner):
    assert not await runner.after_may_change(config(output_guardrails=[WORDS]), chat("x"))
    assert not await runner.after_may_change(config(output_guardrails=[{"async": True, **WORDS}]), chat("x"))
    assert await runner.after_may_change(config(output_guardrails=[{"deny": True, **WORDS}]), chat("x"))
    assert await runner.after_may_change(config(output_guardrails=[{"default.pii": {"redact": True}}]), chat("x"))
    assert await runner.after_may_change(config(output_guardrails=[{"on_success": {"deny": True}, **WORDS}]),
                                         chat("x"))
