"""What the gateway answers each MCP method with, on one server's endpoint (``/v1/mcp/{slug}``) or the combined one
(``/v1/mcp``): answered here (``ping``, ``server/discover``), composed from the servers' lists (``tools/list``,
``prompts/list``, ``resources/list`` on the combined endpoint, each filtered as ``catalog.py`` says), or sent on to
the one server a request is for (``tools/call``, ``prompts/get``, ``resources/read`` and, on one server's endpoint,
every other method) with the answer relayed as it comes (``Forward``).

``initialize`` and the client's session belong to the HTTP edge (``gateway/api/mcp.py``); so do records, limits and
guardrails, which apply to what ``Forward`` names.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec

from gateway.mcp import wire
from gateway.mcp.catalog import Catalog, Permit, namespaced, split_name
from gateway.mcp.target import ServerTarget

log = logging.getLogger("gateway.mcp")

#: the capabilities the gateway offers its clients (it relays tools, prompts and resources; lists do not change
#: under a client without a fresh list call)
CAPABILITIES = {"tools": {"listChanged": False}, "prompts": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False}}
#: methods a server's own endpoint sends on as they are
_PASSED_ON = frozenset({"completion/complete", "logging/setLevel", "resources/templates/list",
                        "resources/subscribe", "resources/unsubscribe"})


class Forward(msgspec.Struct):
    """A request for one server: ``message`` as the server is sent it (its names the server's own); ``tool`` is
    the tool of a ``tools/call``."""

    target: ServerTarget
    message: wire.Message
    tool: str | None = None


class Reply(msgspec.Struct):
    """An answer the gateway composed: the JSON-RPC ``result``."""

    result: Any


class Relay:
    """Answers one client request (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    async def answer(self, message: wire.Message, targets: dict[str, ServerTarget], single: ServerTarget | None,
                     permit: Permit, modern: bool) -> Forward | Reply:
        """``targets``: the caller's servers by slug (the combined endpoint) or just ``single``'s."""
        method = message.method
        assert isinstance(method, str)
        if method == "ping":
            return Reply({})
        if method == "server/discover":
            return Reply(discover_result())
        if method == "tools/list":
            return Reply(self._listed(modern, "tools", await self._tools(targets, single, permit)))
        if method == "tools/call":
            return await self._call(message, targets, single, permit)
        if single is not None:
            if method in ("prompts/list", "prompts/get", "resources/list", "resources/read") or method in _PASSED_ON:
                return Forward(single, message)
            raise wire.RpcError(wire.METHOD_NOT_FOUND, f"Method not found: {method}")
        if method in ("prompts/list", "resources/list", "resources/templates/list"):
            field = {"prompts/list": "prompts", "resources/list": "resources",
                     "resources/templates/list": "resourceTemplates"}[method]
            return Reply(self._listed(modern, field, await self._combined(method, field, targets)))
        if method == "prompts/get":
            target, name = split_name(message.param("name"), targets)
            return Forward(target, _renamed(message, name))
        if method == "resources/read":
            return Forward(await self._owner(message.param("uri"), targets), message)
        raise wire.RpcError(wire.METHOD_NOT_FOUND, f"Method not found: {method} (on /v1/mcp; a server's own "
                                                   f"endpoint /v1/mcp/<slug> passes it on)")

    async def _call(self, message: wire.Message, targets: dict[str, ServerTarget], single: ServerTarget | None,
                    permit: Permit) -> Forward:
        name = message.param("name")
        if not isinstance(name, str) or not name:
            raise wire.RpcError(wire.INVALID_PARAMS, "tools/call needs params.name, the tool's name")
        if single is not None:
            target, tool = single, name
        else:
            target, tool = split_name(name, targets)
        await self.catalog.tool(target, tool, permit)
        return Forward(target, _renamed(message, tool) if tool != name else message, tool)

    async def _tools(self, targets: dict[str, ServerTarget], single: ServerTarget | None,
                     permit: Permit) -> list[dict[str, Any]]:
        if single is not None:
            return await self.catalog.tools(single, permit)
        found = await asyncio.gather(*(self.catalog.tools(t, permit) for t in targets.values()),
                                     return_exceptions=True)
        tools: list[dict[str, Any]] = []
        for target, listed in zip(targets.values(), found):
            if isinstance(listed, BaseException):
                _skipped(target, "tools/list", listed)
                continue
            tools.extend({**tool, "name": namespaced(target.slug, tool["name"])} for tool in listed)
        return tools

    async def _combined(self, method: str, field: str, targets: dict[str, ServerTarget]) -> list[dict[str, Any]]:
        found = await asyncio.gather(*(self.catalog.listed(t, method, field) for t in targets.values()),
                                     return_exceptions=True)
        items: list[dict[str, Any]] = []
        for target, listed in zip(targets.values(), found):
            if isinstance(listed, BaseException):
                _skipped(target, method, listed)
                continue
            if field == "prompts":
                items.extend({**item, "name": namespaced(target.slug, str(item.get("name")))} for item in listed)
            else:
                items.extend(listed)
        return items

    async def _owner(self, uri: Any, targets: dict[str, ServerTarget]) -> ServerTarget:
        if not isinstance(uri, str) or not uri:
            raise wire.RpcError(wire.INVALID_PARAMS, "resources/read needs params.uri")
        for target in targets.values():
            try:
                listed = await self.catalog.listed(target, "resources/list", "resources")
            except wire.RpcError:
                continue
            if any(item.get("uri") == uri for item in listed):
                return target
        raise wire.RpcError(wire.INVALID_PARAMS, f"Unknown resource: {uri} (on /v1/mcp a resource is read from the "
                                                 f"server whose resources/list holds it)")

    @staticmethod
    def _listed(modern: bool, field: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {field: items}
        if modern:
            result.update(resultType="complete", cacheScope="private", ttlMs=0)
        return result


def discover_result() -> dict[str, Any]:
    return {"supportedVersions": list(wire.MODERN_VERSIONS), "capabilities": CAPABILITIES, "cacheScope": "private",
            "ttlMs": 0, "resultType": "complete", "_meta": {wire.SERVER_INFO_META: wire.SERVER_INFO}}


def initialize_result(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": wire.SERVER_INFO,
            "instructions": "Tools of the MCP servers this gateway key may use."}


def _renamed(message: wire.Message, name: str) -> wire.Message:
    params = dict(message.params) if isinstance(message.params, dict) else {}
    params["name"] = name
    return msgspec.structs.replace(message, params=params)


def _skipped(target: ServerTarget, method: str, exc: BaseException) -> None:
    text = exc.message if isinstance(exc, wire.RpcError) else type(exc).__name__
    log.warning("MCP server '%s' left out of %s on /v1/mcp: %s", target.slug, method, text)
