"""Micro benchmark of guardrails: each built-in check on a typical chat request, and the runner's overhead.

Each round builds a fresh Subject (the text is extracted per request), so a figure is what one check adds to one
request. ``runner`` figures go through ``GuardrailRunner.before`` / ``after`` on a running event loop (one
``run_until_complete`` per round; ``loop_baseline`` is that cost alone), ``webhook`` through a loopback aiohttp
service on the same loop.

Run: ``python -m pytest bench/micro/test_guardrails_bench.py --benchmark-enable``.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiohttp import web

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.guardrails import GuardrailAnswer, GuardrailRequest, GuardrailRunner
from gateway.guardrails.checks import build_check
from gateway.guardrails.text import Subject
from gateway.settings import Settings

PROMPT = ("You are a helpful assistant for our billing team. A customer writes: I was charged twice for my "
          "subscription last month and I would like a refund for the duplicate charge. My account email is on "
          "file. Please draft a short, polite reply that explains the refund timeline and next steps.")
ANSWER = ("Thank you for reaching out, and I am sorry about the duplicate charge. I have checked your account and "
          "can confirm that the second payment was made in error. A refund has been issued today; it usually "
          "appears within 5 to 7 business days, depending on your bank. You do not need to do anything else. "
          "If it has not arrived after 7 days, reply to this message and we will follow up right away. "
          "See https://billing.example.com/refunds for details. Have a great day!")
BODY = {"model": "gpt-x-mini", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": PROMPT}]}
ANSWER_DOC = {"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}}]}
HEADERS = [(b"authorization", b"Bearer " + (
    b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1MSJ9.mCq5Afb2cY6udtB0fDpb7FixBO2X9hu1GpmfRRlz0wU"))]

CHECKS = {
    "default.regexMatch": {"rule": r"\brefund\b"},
    "default.contains": {"words": ["refund", "sorry", "competitor"], "operator": "any"},
    "default.wordCount": {"minWords": 10, "maxWords": 500},
    "default.sentenceCount": {"minSentences": 1, "maxSentences": 20},
    "default.characterCount": {"maxCharacters": 4000},
    "default.jsonSchema": {"schema": {"type": "object", "required": ["a"]}},
    "default.jsonKeys": {"keys": ["a"]},
    "default.validUrls": {},
    "default.containsCode": {"format": "python"},
    "default.alluppercase": {},
    "default.alllowercase": {},
    "default.endsWith": {"suffix": "Have a great day!"},
    "default.modelWhitelist": {"models": ["gpt-x-mini", "gpt-x-large"]},
    "default.requiredMetadataKeys": {"metadata": {"team": ["billing", "support"]}, "matchType": "exact"},
    "default.allowedRequestTypes": {"allowedTypes": ["chat", "completions"]},
    "default.jwt": {"secret": "bench-secret"},
    "default.pii": {},
}


def subject() -> Subject:
    request = GuardrailRequest(BODY, "chat", metadata={"team": "billing"}, headers=HEADERS)
    return Subject("after", request, GuardrailAnswer(ANSWER_DOC))


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_check(benchmark, check_id):
    """One check on a fresh subject: the text extraction plus the check."""
    check = build_check(check_id, CHECKS[check_id], "bench")
    result = benchmark(lambda: check.run(subject()))
    assert result.explanation


def test_json_schema_on_a_json_answer(benchmark):
    """default.jsonSchema validating a small JSON answer (the table above finds no JSON in the prose answer)."""
    schema = {"type": "object", "required": ["refund", "days"],
              "properties": {"refund": {"type": "boolean"}, "days": {"type": "integer", "minimum": 1},
                             "note": {"type": "string", "maxLength": 200}}}
    check = build_check("default.jsonSchema", {"schema": schema}, "bench")
    doc = {"choices": [{"message": {"content": '{"refund": true, "days": 7, "note": "duplicate charge"}'}}]}
    result = benchmark(lambda: check.run(Subject("after", GuardrailRequest(BODY, "chat"), GuardrailAnswer(doc))))
    assert result.verdict


def test_subject_only(benchmark):
    """Building the subject and extracting the answer's text, which every text check pays once per request."""
    benchmark(lambda: subject().text)


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_loop_baseline(benchmark, loop):
    async def nothing() -> None:
        return None

    benchmark(lambda: loop.run_until_complete(nothing()))


@pytest.mark.parametrize("n_checks", [1, 5])
def test_runner_after(benchmark, loop, n_checks):
    """``GuardrailRunner.after`` with output guardrails holding ``n_checks`` cheap checks (plan cached)."""
    names = ["default.wordCount", "default.contains", "default.regexMatch", "default.endsWith",
             "default.characterCount"][:n_checks]
    cfg = ConfigParser(config_checks()).parse(json.dumps({"provider": "vendorA", "api_key": "k",
                                   "output_guardrails": [{name: CHECKS[name]} for name in names]}))
    runner = GuardrailRunner(Settings())
    request = GuardrailRequest(BODY, "chat")
    outcome = benchmark(lambda: loop.run_until_complete(runner.after(cfg, request, GuardrailAnswer(ANSWER_DOC))))
    assert len(outcome.results) == n_checks and outcome.verdict
    loop.run_until_complete(runner.close())


def test_runner_webhook_loopback(benchmark, loop):
    """A ``default.webhook`` check answered by an aiohttp service on 127.0.0.1 (same process and loop)."""
    from gateway.upstream.client import UpstreamClient

    async def verdict(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"verdict": True})

    async def setup():
        app = web.Application()
        app.router.add_post("/hook", verdict)
        app_runner = web.AppRunner(app, access_log=None)
        await app_runner.setup()
        site = web.TCPSite(app_runner, "127.0.0.1", 0)
        await site.start()
        client = UpstreamClient(Settings(allow_private_hosts=("127.0.0.1",)))
        await client.start()
        return app_runner, client, site._server.sockets[0].getsockname()[1]

    app_runner, client, port = loop.run_until_complete(setup())
    cfg = ConfigParser(config_checks()).parse(json.dumps({"provider": "vendorA", "api_key": "k", "input_guardrails": [
        {"default.webhook": {"webhookURL": f"http://127.0.0.1:{port}/hook", "timeout": 2000}}]}))
    runner = GuardrailRunner(Settings(), client)
    request = GuardrailRequest(BODY, "chat")
    deadline = time.monotonic() + 60
    outcome = benchmark.pedantic(lambda: loop.run_until_complete(runner.before(cfg, request)), rounds=300,
                                 iterations=1, warmup_rounds=20)
    assert outcome.verdict and time.monotonic() < deadline

    async def teardown():
        await runner.close()
        await client.close()
        await app_runner.cleanup()

    loop.run_until_complete(teardown())
