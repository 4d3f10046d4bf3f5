"""The guardrails doc's examples of reading ``hook_results`` from the openai SDK, langchain-openai and the anthropic SDK
(a 446 and a 246, on chat and the front doors), run as written against the real gateway."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.servers import ADMIN_KEY

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guardrails.md"
GUARDRAILS = [{"deny": True, "default.contains": {"words": ["password"], "operator": "none"}},
              {"default.wordCount": {"maxWords": 3}}]


def example(title: str) -> str:
    """The guardrails doc's python block whose first line is ``# <title>``."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    found = [b for b in blocks if b.startswith(f"# {title}\n")]
    assert len(found) == 1, f"docs/guardrails.md has no single example '{title}'"
    return found[0]


def run_example(title: str, gateway, mock) -> dict:
    base = mock.scenario()
    config = {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1",
              "input_guardrails": GUARDRAILS}
    names = {"GATEWAY": gateway.url,
             "HEADERS": {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": json.dumps(config)}}
    exec(compile(example(title), f"docs/guardrails.md: {title}", "exec"), names)  # the doc's own example
    return names


def check_denied(denied: dict) -> None:
    hook = denied["before_request_hooks"][0]
    assert hook["deny"] is True and hook["verdict"] is False
    assert hook["checks"][0]["id"] == "default.contains"


def check_flagged(flagged: dict) -> None:
    assert [h["verdict"] for h in flagged["before_request_hooks"]] == [True, False]
    assert flagged["before_request_hooks"][1]["checks"][0]["id"] == "default.wordCount"


def test_the_openai_sdk_example_reads_hook_results_of_446_and_246(served_gateway, mock):
    names = run_example("hook_results with the openai SDK", served_gateway, mock)
    check_denied(names["denied"])
    assert names["status"] == 246 and names["answer"].choices[0].message.content
    check_flagged(names["flagged"])
    check_flagged(names["completion"].model_extra["hook_results"])
    check_flagged(names["streamed"])


def test_the_langchain_example_reads_hook_results_of_446_and_246(served_gateway, mock):
    names = run_example("hook_results with langchain-openai", served_gateway, mock)
    check_denied(names["denied"])
    assert names["status"] == 246 and names["reply"].content
    check_flagged(names["flagged"])
    assert [status for status, _ in names["answers"]] == [446, 246]


def test_the_anthropic_sdk_example_reads_hook_results_on_the_messages_and_responses_doors(served_gateway, mock):
    """A deny on a front door keeps its verdicts: anthropic's error shape on /v1/messages, the usual envelope on
    /v1/responses, both with ``hook_results``."""
    names = run_example("hook_results with the anthropic SDK", served_gateway, mock)
    check_denied(names["denied"])
    assert names["status"] == 246
    check_flagged(names["flagged"])
    check_denied(names["denied_response"])
