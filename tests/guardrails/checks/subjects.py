"""Building subjects and running one check on them, for the check tests."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.guardrails.checks import ParamError, Verdict, build_check
from gateway.guardrails.text import GuardrailAnswer, GuardrailRequest, Subject


def answer(text: str, **request: Any) -> Subject:
    """An after-request subject whose chat answer says ``text``."""
    body = {"model": request.pop("model", "m"), "messages": [{"role": "user", "content": "hi"}]}
    doc = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    return Subject("after", GuardrailRequest(body, "chat", **request), GuardrailAnswer(doc))


def prompt(text: str, endpoint: str = "chat", **request: Any) -> Subject:
    """A before-request subject whose last chat message (or prompt / input) is ``text``."""
    model = request.pop("model", "m")
    if endpoint == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": text}]}
    elif endpoint == "completions":
        body = {"model": model, "prompt": text}
    else:
        body = {"model": model, "input": text}
    return Subject("before", GuardrailRequest(body, endpoint, **request))


def judge(check_id: str, params: dict[str, Any], subject: Subject) -> Verdict:
    check = build_check(check_id, params, f"checks.{check_id}")
    return check.run(subject)


def passes(check_id: str, params: dict[str, Any], subject: Subject) -> bool:
    result = judge(check_id, params, subject)
    assert result.explanation  # every verdict says why
    return result.verdict


def param_fault(check_id: str, params: Any) -> str:
    """The path a ParamError names for bad ``params``."""
    with pytest.raises(ParamError) as info:
        build_check(check_id, params, "input_guardrails[0]." + check_id)
    assert info.value.detail
    return info.value.param
