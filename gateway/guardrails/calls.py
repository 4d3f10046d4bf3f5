"""Guardrails on calls that are no model request (an MCP tool call, an A2A agent call): which config judges a call,
and what a deny says.

The config is the request's ``x-gateway-config`` (inline JSON or a saved config's id), else the one the called
record names (an MCP server's or an agent's ``config``); it needs no provider, only the guardrail lists, and one
without them judges nothing. A deny names the guardrail that denied and carries every result as ``hook_results``,
as a model request's ``hook_results`` do; the caller puts both in the JSON-RPC error of its protocol.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.guardrails.results import PhaseOutcome
from gateway.guardrails.runner import GuardrailRunner
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
