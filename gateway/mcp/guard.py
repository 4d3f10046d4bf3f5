"""Guardrails on MCP tool calls: the config's ``input_guardrails`` and ``before_request_hooks`` judge a call's
arguments before it reaches the server, its ``output_guardrails`` and ``after_request_hooks`` judge the tool's
result before it reaches the client, with the same checks, saved guardrails and runner as model requests.

The config is the request's ``x-gateway-config`` (inline JSON or a saved config's id), else the one the server's
record names (``ServerTarget.config``); it needs no provider, only the guardrail lists. The text judged before the
call is every string in ``arguments`` (``guardrails.text.request_segments``, endpoint ``mcp.tools/call``); after it,
the result's text content parts. A deny is the JSON-RPC error ``GUARDRAIL_DENIED`` whose message names the
guardrail and whose ``data.hook_results`` lists every result, as a model request's ``hook_results`` do; a redaction
rewrites the arguments sent or the text parts returned.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.controlplane.directory import RecordCache
from gateway.guardrails import GuardrailAnswer, GuardrailRequest, GuardrailRunner, PhaseOutcome
from gateway.guardrails.calls import CallConfigs, denial
from gateway.http import jsonrpc
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError
from gateway.mcp import wire
from gateway.mcp.target import ServerTarget
from gateway.schema.config import Config

ENDPOINT = "mcp.tools/call"


class CallGuard:
    """Finds a call's config and runs its guardrails (see the module docstring)."""

    def __init__(self, parse: Callable[[str | bytes], Config], records: RecordCache,
                 runner: Callable[[], GuardrailRunner]) -> None:
        self.configs = CallConfigs(parse, records)
        self._runner = runner

    async def config(self, ctx: RequestContext, workspace: str, target: ServerTarget) -> Config | None:
        """The call's config with guardrails, or None (no config, or one without guardrail lists)."""
        try:
            return await self.configs.config(ctx.config, target.config, workspace)
        except GatewayError as exc:
            raise wire.RpcError(wire.INVALID_PARAMS, exc.message) from None

    def request(self, ctx: RequestContext, workspace: str, tool: str, params: dict[str, Any]) -> GuardrailRequest:
        return GuardrailRequest(params, ENDPOINT, tool, ctx.metadata, ctx.raw_headers, workspace=workspace)

    async def before(self, config: Config, request: GuardrailRequest) -> dict[str, Any] | None:
        """Run the input phase; the arguments' params as redacted (None: unchanged), or the deny's error."""
        if not GuardrailRunner.has_before(config):
            return None
        outcome = await self._runner().before(config, request)
        _refuse(outcome)
        return outcome.body if outcome.body is not None else None

    async def after(self, config: Config, request: GuardrailRequest, response: bytes) -> bytes:
        """Run the output phase on the server's response message; the message to send (redacted, or the deny's
        error in its place)."""
        if not GuardrailRunner.has_after(config):
            return response
        message = wire.decode(response)
        if not isinstance(message.result, dict):
            return response  # an error answer: nothing of the tool's to judge
        outcome = await self._runner().after(config, request, GuardrailAnswer(json=message.result))
        try:
            _refuse(outcome)
        except wire.RpcError as exc:
            return exc.body(message.id if isinstance(message.id, (int, str)) else None)
        if outcome.body is None:
            return response
        return wire.encode(msgspec.structs.replace(message, result=outcome.body))


def _refuse(outcome: PhaseOutcome) -> None:
    denied = denial(outcome)
    if denied is not None:
        name, data = denied
        raise wire.RpcError(jsonrpc.GUARDRAIL_DENIED, f"denied by guardrail '{name}' ({outcome.phase} the tool call)",
                            data=data)
