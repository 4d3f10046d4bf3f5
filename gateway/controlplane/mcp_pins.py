"""Pinned tool definitions of an MCP server: a server's listed tools compared with the definitions an admin approved,
and an approval turned into new pins (docs/control-plane.md, "MCP servers").

A tool as a server lists it (MCP ``tools/list``) is a JSON object with ``name``, an optional ``description`` and
``inputSchema``; pinning compares those three through ``gateway.schema.mcp_target.tool_digest``, so a change of any
of them (a "rug pull") makes the tool ``pending_change`` until approved again. Each tool's status:

- ``approved``: listed with the pinned digest (or pinned while the server could not be read);
- ``pending_change``: listed with another digest (``diff`` names what changed);
- ``pending_new``: listed, never approved;
- ``removed``: pinned, no longer listed (approving it drops the pin).
"""

from __future__ import annotations

from typing import Any

from gateway.controlplane.mcp_servers import Approval, McpServer
from gateway.http.errors import InvalidRequest
from gateway.schema.mcp_target import ToolPin, tool_digest

APPROVED, PENDING_CHANGE, PENDING_NEW, REMOVED = "approved", "pending_change", "pending_new", "removed"
PENDING = (PENDING_CHANGE, PENDING_NEW, REMOVED)


def listed_by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A server's listed tools by name (entries without a string name are left out; a name listed twice counts
    once, as first listed)."""
    found: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            found.setdefault(tool["name"], tool)
    return found


def pin_of(tool: dict[str, Any], approved_at: str) -> ToolPin:
    """The pin of a listed tool as it is now."""
    schema = tool.get("inputSchema")
    description = tool.get("description")
    return ToolPin(name=tool["name"], description=description if isinstance(description, str) else None,
                   input_schema=schema if isinstance(schema, dict) else {}, digest=tool_digest(tool),
                   approved_at=approved_at)


def pins_of(tools: list[dict[str, Any]], approved_at: str) -> dict[str, ToolPin]:
    """Every listed tool pinned as it is now (a server's tools when it is added)."""
    return {name: pin_of(tool, approved_at) for name, tool in listed_by_name(tools).items()}


def status(pin: ToolPin | None, tool: dict[str, Any] | None) -> str:
    if pin is None:
        return PENDING_NEW
    if tool is None:
        return REMOVED
    return APPROVED if tool_digest(tool) == pin.digest else PENDING_CHANGE


def _definition(pin: ToolPin | None, tool: dict[str, Any] | None) -> dict[str, Any] | None:
    if pin is not None:
        return {"description": pin.description, "input_schema": pin.input_schema, "digest": pin.digest}
    if tool is not None:
        return {"description": tool.get("description"), "input_schema": tool.get("inputSchema"),
                "digest": tool_digest(tool)}
    return None


def _diff(approved: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    return {field: {"before": approved[field], "after": current[field]}
            for field in ("description", "input_schema") if approved[field] != current[field]}


def tool_views(record: McpServer, listed: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Each pinned or listed tool (by name) with its status, whether ``allowed_tools`` allows it, the approved and
    the current definition, and for a ``pending_change`` the fields that changed. ``listed`` None (the server could
    not be read): the pins alone, ``current`` null."""
    current = listed_by_name(listed) if listed is not None else {}
    allowed = None if record.allowed_tools is None else set(record.allowed_tools)
    views = []
    for name in sorted(set(record.tools) | set(current)):
        pin, tool = record.tools.get(name), current.get(name)
        state = APPROVED if listed is None else status(pin, tool)
        approved = _definition(pin, None)
        now = _definition(None, tool)
        views.append({
            "name": name, "status": state, "allowed": allowed is None or name in allowed,
            "approved": approved, "current": now,
            "diff": _diff(approved, now) if state == PENDING_CHANGE and approved and now else None,
        })
    return views


def approve(record: McpServer, listed: list[dict[str, Any]], names: list[str] | None, by_key_id: str,
            at: str) -> tuple[dict[str, ToolPin], list[Approval], list[dict[str, Any]]]:
    """The pins after approving ``names`` (None: every pending tool) as ``listed`` now, the approvals made and, for
    each, the view before approval (its diff). A name neither listed nor pinned is a 400 naming ``tools[i]``; an
    approved tool named again changes nothing."""
    current = listed_by_name(listed)
    if names is None:
        chosen = [n for n in sorted(set(record.tools) | set(current))
                  if status(record.tools.get(n), current.get(n)) in PENDING]
    else:
        chosen = []
        for i, name in enumerate(names):
            if name not in current and name not in record.tools:
                raise InvalidRequest(f"tools[{i}]: the server lists no tool {name!r} and none is pinned under that "
                                     "name", param=f"tools[{i}]")
            if name not in chosen:
                chosen.append(name)
    before = {view["name"]: view for view in tool_views(record, listed)}
    pins = dict(record.tools)
    approvals: list[Approval] = []
    changed: list[dict[str, Any]] = []
    for name in chosen:
        pin, tool = record.tools.get(name), current.get(name)
        state = status(pin, tool)
        if state == APPROVED:
            continue
        if tool is None:
            del pins[name]
        else:
            pins[name] = pin_of(tool, at)
        change = {PENDING_NEW: "added", PENDING_CHANGE: "changed", REMOVED: "removed"}[state]
        approvals.append(Approval(at=at, by_key_id=by_key_id, tool=name, change=change,
                                  before_digest=pin.digest if pin else None,
                                  after_digest=pins[name].digest if name in pins else None))
        changed.append(before[name])
    return pins, approvals, changed

