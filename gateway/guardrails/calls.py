"""Guardrails on calls that are no model request (an MCP tool call, an A2A agent call): which config judges a call,
and what a deny says.

The config is the request's ``x-gateway-config`` (inline JSON or a saved config's id), else the one the called
record names (an MCP server's or an agent's ``config``); it needs no provider, only the guardrail lists, and one
without them judges nothing. A deny names the guardrail that denied and carries every result as ``hook_results``,
as a model request's ``hook_results`` do. ``JsonRpcGuard`` runs the phases on such a call: the input phase on the
params the caller picked, the output phase on a JSON-RPC answer's ``result`` (an error answer has nothing of the
called's to judge); a deny is the protocol's JSON-RPC error ``GUARDRAIL_DENIED`` (-32010) with that data, a
redaction the params or result rewritten.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.guardrails.results import PhaseOutcome
from gateway.guardrails.runner import GuardrailRunner
from gateway.guardrails.text import GuardrailAnswer, GuardrailRequest
from gateway.http import jsonrpc
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.schema.config import Config

PARAM = "x-gateway-config"


class CallConfigs:
    """Finds the config with guardrails that judges a call."""

    def __init__(self, parse: Callable[[str | bytes], Config], records: RecordCache) -> None:
        self._parse = parse
        self.records = records

    async def config(self, given: str | None, named: str | None, workspace: str) -> Config | None:
        """The config of a call whose request gave ``given`` and whose record names ``named``, or None (neither,
        or a config without guardrail lists); a 400 (``x-gateway-config: ...``) when it cannot be used."""
        text = (given or named or "").strip()
        if not text:
            return None
        try:
            config = self._parse(text if text.startswith("{") else await self._saved(workspace, text))
        except GatewayError as exc:
            raise InvalidRequest(f"{PARAM}: {exc.message}", param=PARAM) from None
        if GuardrailRunner.has_before(config) or GuardrailRunner.has_after(config):
            return config
        return None

    async def _saved(self, workspace: str, id: str) -> bytes:
        try:
            found = self.records.saved_config(workspace, id)
        except RecordsNeeded as needed:
            await self.records.fetch(needed)
            found = self.records.saved_config(workspace, id)
        if found is None:
            raise InvalidRequest(f"no saved config '{id}' in this workspace", param=PARAM)
        return found


def denial(outcome: PhaseOutcome) -> tuple[str, dict[str, Any]] | None:
    """``(guardrail, data)`` of a phase that denied: the guardrail's id (``a guardrail`` when unknown) and the error
    data ``{"guardrail", "hook_results"}``; None when the phase did not deny."""
    if not outcome.deny:
        return None
    denied = outcome.denied_by
    name = denied.id if denied is not None else "a guardrail"
    return name, {"guardrail": name, "hook_results": msgspec.to_builtins(outcome.results)}


class JsonRpcGuard:
    """Finds a JSON-RPC call's config and runs its guardrails (see the module docstring): ``endpoint`` is what the
    checks see as the request's endpoint (``gateway/guardrails/text.py``), ``called`` names the call in a deny's
    message (``the tool call``), ``error`` is the protocol's JSON-RPC error class."""

    def __init__(self, parse: Callable[[str | bytes], Config], records: RecordCache,
                 runner: Callable[[], GuardrailRunner], endpoint: str, called: str,
                 error: type[jsonrpc.RpcError] = jsonrpc.RpcError) -> None:
        self.configs = CallConfigs(parse, records)
        self._runner = runner
        self.endpoint = endpoint
        self.called = called
        self.error = error

    async def config(self, ctx: RequestContext, named: str | None, workspace: str) -> Config | None:
        """The call's config with guardrails (``named``: the one the called record names), or None (no config, or
        one without guardrail lists); -32602 when it cannot be used."""
        try:
            return await self.configs.config(ctx.config, named, workspace)
        except GatewayError as exc:
            raise self.error(jsonrpc.INVALID_PARAMS, exc.message) from None

    def request(self, ctx: RequestContext, workspace: str, name: str, params: dict[str, Any]) -> GuardrailRequest:
        """What the checks judge of a call to ``name`` (the tool, the agent) sending ``params``."""
        return GuardrailRequest(params, self.endpoint, name, ctx.metadata, ctx.raw_headers, workspace=workspace)

    async def before(self, config: Config, request: GuardrailRequest) -> dict[str, Any] | None:
        """Run the input phase; the params as redacted (None: unchanged), or the deny's error."""
        if not GuardrailRunner.has_before(config):
            return None
        outcome = await self._runner().before(config, request)
        self._refuse(outcome)
        return outcome.body if outcome.body is not None else None

    async def after(self, config: Config, request: GuardrailRequest, response: bytes) -> bytes:
        """Run the output phase on the JSON-RPC response the called sent; the response to send (redacted, or the
        deny's error in its place)."""
        if not GuardrailRunner.has_after(config):
            return response
        try:
            message = msgspec.json.decode(response)
        except (msgspec.DecodeError, RecursionError):
            return response
        if not isinstance(message, dict) or not isinstance(message.get("result"), dict):
            return response  # an error answer: nothing of the called's to judge
        outcome = await self._runner().after(config, request, GuardrailAnswer(json=message["result"]))
        try:
            self._refuse(outcome)
        except jsonrpc.RpcError as exc:
            id = message.get("id")
            return exc.body(id if isinstance(id, (int, str)) and not isinstance(id, bool) else None)
        if outcome.body is None:
            return response
        return msgspec.json.encode({**message, "result": outcome.body})

    def _refuse(self, outcome: PhaseOutcome) -> None:
        denied = denial(outcome)
        if denied is not None:
            name, data = denied
            raise self.error(jsonrpc.GUARDRAIL_DENIED,
                             f"denied by guardrail '{name}' ({outcome.phase} {self.called})", data=data)
