"""What a caller may see and call of a workspace's MCP servers: the servers' lists read and kept for a short while,
each tool checked against its pinned definition, the server's allow-list and the caller's key, by one rule
(``Catalog.allowed``) that both ``tools/list`` and ``tools/call`` apply.

A tool is offered only when all of these hold: an admin approved its definition (``ServerTarget.pins``: the listed
name, description and input schema hash to the pinned digest), the server's ``allowed_tools`` (if any) names it,
and the caller's key permits it (``Permit``). A tool the server lists that was never approved, or whose definition
changed since, is withheld until an admin approves it (``GET /v1/mcp-servers/{slug}/tools`` shows it as pending).
A server's lists are read again once they are ``ttl_s`` old (GATEWAY_MCP_LIST_TTL_MS, at most a minute), so a
change upstream is noticed within that time; a call checks the definition last read.

On the combined endpoint (``/v1/mcp``) tools and prompts are named ``<server slug>__<name>`` (``SEPARATOR``; MCP
server slugs cannot hold it), and a resource is read from the server whose list holds its URI.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from gateway.bounded_cache import BoundedCache
from gateway.mcp import wire
from gateway.mcp.target import SEPARATOR, ServerTarget, tool_digest
from gateway.mcp.upstream import McpUpstream

#: (server slug, tool name) -> whether the caller's key may call it
Permit = Callable[[str, str], bool]


def allow_all(slug: str, tool: str) -> bool:
    return True


class Catalog:
    """The lists of the servers this worker called recently (see the module docstring)."""

    def __init__(self, upstream: McpUpstream, ttl_s: float) -> None:
        self.upstream = upstream
        self.ttl_s = ttl_s
        self._lists: BoundedCache[tuple[str, str, str, str], tuple[float, list[dict[str, Any]]]] = BoundedCache(4096)
        self._reading: dict[tuple[str, str, str, str], asyncio.Task[list[dict[str, Any]]]] = {}
        #: each listed tool's digest, by the identity of the listed dict (a list read again holds new dicts)
        self._digests: BoundedCache[int, tuple[dict[str, Any], str]] = BoundedCache(65536)

    async def listed(self, target: ServerTarget, method: str, field: str) -> list[dict[str, Any]]:
        """The server's ``method`` list (every page), read at most ``ttl_s`` ago; concurrent readers share one
        read."""
        key = (target.workspace, target.slug, target.url, method)
        kept = self._lists.get(key)
        if kept is not None and time.monotonic() - kept[0] < self.ttl_s:
            return kept[1]
        task = self._reading.get(key)
        if task is None:
            task = asyncio.ensure_future(self.upstream.list_all(target, method, field))
            self._reading[key] = task
            task.add_done_callback(lambda _t: self._reading.pop(key, None))
        items = await asyncio.shield(task)
        self._lists[key] = (time.monotonic(), items)
        return items

    def forget(self, target: ServerTarget) -> None:
        for key in [k for k in self._lists if k[:2] == (target.workspace, target.slug)]:
            del self._lists[key]

    def digest(self, tool: dict[str, Any]) -> str:
        """``tool_digest(tool)``, worked out once per listed tool."""
        kept = self._digests.get(id(tool))
        if kept is not None and kept[0] is tool:
            return kept[1]
        digest = tool_digest(tool)
        self._digests[id(tool)] = (tool, digest)
        return digest

    def allowed(self, target: ServerTarget, tool: dict[str, Any], permit: Permit) -> bool:
        """The one rule: ``tool`` (as the server lists it) is approved as it is now, allowed by the server's record
        and permitted to the caller."""
        name = tool.get("name")
        if not isinstance(name, str):
            return False
        pin = target.pins.get(name)
        if pin is None or pin.digest != self.digest(tool):
            return False
        if target.allowed_tools is not None and name not in target.allowed_tools:
            return False
        return permit(target.slug, name)

    async def tools(self, target: ServerTarget, permit: Permit) -> list[dict[str, Any]]:
        """The server's tools the caller may see, as the server lists them."""
        return [tool for tool in await self.listed(target, "tools/list", "tools") if self.allowed(target, tool, permit)]

    async def tool(self, target: ServerTarget, name: str, permit: Permit) -> dict[str, Any]:
        """The listed definition of the tool ``name`` when the caller may call it; else -32602 "unknown tool" (a
        withheld or forbidden tool reads exactly as a missing one)."""
        for tool in await self.listed(target, "tools/list", "tools"):
            if tool.get("name") == name:
                if self.allowed(target, tool, permit):
                    return tool
                break
        raise wire.RpcError(wire.INVALID_PARAMS, f"Unknown tool: {name}")


def namespaced(slug: str, name: str) -> str:
    return f"{slug}{SEPARATOR}{name}"


def split_name(name: Any, targets: dict[str, ServerTarget]) -> tuple[ServerTarget, str]:
    """The server and its own name for a combined-endpoint name ``<slug>__<name>``; -32602 when no server of the
    caller's has that slug."""
    if isinstance(name, str):
        slug, sep, rest = name.partition(SEPARATOR)
        target = targets.get(slug)
        if sep and rest and target is not None:
            return target, rest
    raise wire.RpcError(wire.INVALID_PARAMS, f"Unknown tool or prompt: {name!r} (names on /v1/mcp are "
                                             f"<server>{SEPARATOR}<name>)")
