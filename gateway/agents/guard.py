"""Guardrails on agent calls: the config's ``input_guardrails`` and ``before_request_hooks`` judge the text parts of
the message a call sends (``SendMessage``, ``SendStreamingMessage``, ``message/send``, ``message/stream``) before
the agent sees it; its ``output_guardrails`` and ``after_request_hooks`` judge the text parts of a JSON answer's
result (the message, or the task's status message and artifacts) before the client does, with the same checks,
saved guardrails and runner as model requests (endpoint ``a2a.message`` in ``gateway/guardrails/text.py``).

The config is the request's ``x-gateway-config``, else the agent's record's (``gateway/guardrails/calls.py``). A
stream's events are relayed as they come and are not judged after: a config whose output checks must see every
answer has its agent called without streaming. A deny is the JSON-RPC error ``GUARDRAIL_DENIED`` (-32010) whose
message names the guardrail and whose ``data.hook_results`` lists every result; a redaction rewrites the parts sent
or returned. The runner of both phases is ``gateway/guardrails/calls.py``'s, as an MCP tool call's is.
"""

from __future__ import annotations

from typing import Callable

from gateway.agents import wire
from gateway.controlplane.directory import RecordCache
from gateway.guardrails import GuardrailRunner
from gateway.guardrails.calls import JsonRpcGuard
from gateway.guardrails.text import A2A_MESSAGE
from gateway.schema.config import Config


class AgentGuard(JsonRpcGuard):
    """An agent call's guardrails (see the module docstring)."""

    def __init__(self, parse: Callable[[str | bytes], Config], records: RecordCache,
                 runner: Callable[[], GuardrailRunner]) -> None:
        super().__init__(parse, records, runner, A2A_MESSAGE, "the agent call", wire.RpcError)
