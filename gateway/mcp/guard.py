"""Guardrails on MCP tool calls: the config's ``input_guardrails`` and ``before_request_hooks`` judge a call's
arguments before it reaches the server, its ``output_guardrails`` and ``after_request_hooks`` judge the tool's
result before it reaches the client, with the same checks, saved guardrails and runner as model requests.

The config is the request's ``x-gateway-config`` (inline JSON or a saved config's id), else the one the server's
record names (``ServerTarget.config``); it needs no provider, only the guardrail lists. The text judged before the
call is every string in ``arguments`` (``guardrails.text.request_segments``, endpoint ``mcp.tools/call``); after it,
the result's text content parts. A deny is the JSON-RPC error ``GUARDRAIL_DENIED`` whose message names the
guardrail and whose ``data.hook_results`` lists every result, as a model request's ``hook_results`` do; a redaction
rewrites the arguments sent or the text parts returned. The runner of both phases is ``gateway/guardrails/calls.py``'s,
as an agent call's is.
"""

from __future__ import annotations

from typing import Callable

from gateway.controlplane.directory import RecordCache
from gateway.guardrails import GuardrailRunner
from gateway.guardrails.calls import JsonRpcGuard
from gateway.guardrails.text import MCP_TOOL_CALL
from gateway.mcp import wire
from gateway.schema.config import Config


class CallGuard(JsonRpcGuard):
    """A tool call's guardrails (see the module docstring)."""

    def __init__(self, parse: Callable[[str | bytes], Config], records: RecordCache,
                 runner: Callable[[], GuardrailRunner]) -> None:
        super().__init__(parse, records, runner, MCP_TOOL_CALL, "the tool call", wire.RpcError)
