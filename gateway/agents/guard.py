"""Guardrails on agent calls: the config's ``input_guardrails`` and ``before_request_hooks`` judge the text parts of
the message a call sends (``SendMessage``, ``SendStreamingMessage``, ``message/send``, ``message/stream``) before
the agent sees it; its ``output_guardrails`` and ``after_request_hooks`` judge the text parts of a JSON answer's
result (the message, or the task's status message and artifacts) before the client does, with the same checks,
saved guardrails and runner as model requests (endpoint ``a2a.message`` in ``gateway/guardrails/text.py``).

The config is the request's ``x-gateway-config``, else the agent's record's (``gateway/guardrails/calls.py``). A
stream's events are relayed as they come and are not judged after: a config whose output checks must see every
answer has its agent called without streaming. A deny is the JSON-RPC error ``GUARDRAIL_DENIED`` (-32010) whose
message names the guardrail and whose ``data.hook_results`` lists every result; a redaction rewrites the parts sent
or returned.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.agents import wire
from gateway.controlplane.directory import RecordCache
from gateway.guardrails import GuardrailAnswer, GuardrailRequest, GuardrailRunner, PhaseOutcome
from gateway.guardrails.calls import CallConfigs, denial
from gateway.guardrails.text import A2A_MESSAGE
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError
from gateway.schema.agent_target import AgentTarget
from gateway.schema.config import Config


class AgentGuard:
    """Finds a call's config and runs its guardrails (see the module docstring)."""

    def __init__(self, parse: Callable[[str | bytes], Config], records: RecordCache,
                 runner: Callable[[], GuardrailRunner]) -> None:
        self.configs = CallConfigs(parse, records)
        self._runner = runner

    async def config(self, ctx: RequestContext, target: AgentTarget) -> Config | None:
        """The call's config with guardrails, or None (no config, or one without guardrail lists)."""
        try:
            return await self.configs.config(ctx.config, target.config, target.workspace)
        except GatewayError as exc:
            raise wire.RpcError(wire.INVALID_PARAMS, exc.message) from None

    def request(self, ctx: RequestContext, target: AgentTarget, params: dict[str, Any]) -> GuardrailRequest:
        return GuardrailRequest(params, A2A_MESSAGE, target.slug, ctx.metadata, ctx.raw_headers,
                                workspace=target.workspace)

    async def before(self, config: Config, request: GuardrailRequest) -> dict[str, Any] | None:
        """Run the input phase; the params as redacted (None: unchanged), or the deny's error."""
        if not GuardrailRunner.has_before(config):
            return None
        outcome = await self._runner().before(config, request)
        _refuse(outcome)
        return outcome.body if outcome.body is not None else None

    async def after(self, config: Config, request: GuardrailRequest, response: bytes) -> bytes:
        """Run the output phase on the agent's JSON-RPC response; the response to send (redacted, or the deny's
        error in its place)."""
        if not GuardrailRunner.has_after(config):
            return response
        try:
            message = msgspec.json.decode(response)
        except (msgspec.DecodeError, RecursionError):
            return response
        if not isinstance(message, dict) or not isinstance(message.get("result"), dict):
            return response  # an error answer: nothing of the agent's to judge
        outcome = await self._runner().after(config, request, GuardrailAnswer(json=message["result"]))
        try:
            _refuse(outcome)
        except wire.RpcError as exc:
            return exc.body(message.get("id"))
        if outcome.body is None:
            return response
        return wire.encode({**message, "result": outcome.body})


def _refuse(outcome: PhaseOutcome) -> None:
    denied = denial(outcome)
    if denied is not None:
        name, data = denied
        raise wire.RpcError(wire.GUARDRAIL_DENIED, f"denied by guardrail '{name}' ({outcome.phase} the agent call)",
                            data=data)
