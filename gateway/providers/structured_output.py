"""``response_format`` for providers without a JSON mode: the schema as one output tool the model is made to call.

anthropic and cloudA (Converse) have no vendorA-style ``response_format``; both can force a tool call whose input
must follow a JSON schema (anthropic ``tool_choice {type: tool, name}`` / ``{type: any}``, Converse ``toolChoice
{tool: {name}}`` / ``{any: {}}``). The adapters offer that tool and turn its input back into ``message.content``
(JSON text, no ``tool_calls``), streamed as content deltas.

Decisions, the same for both providers:

``response_format`` has passed ``gateway.schema.chat.check_response_format`` (the one check for every provider:
its type, ``json_schema.name`` and ``json_schema.schema``) before an adapter sees it.

- ``{"type": "json_schema", "json_schema": {"name", "description"?, "schema"}}``: the tool's input schema is
  ``schema``; the root must be an object schema (both APIs want a tool input to be an object), else a 400 naming
  ``response_format.json_schema.schema``.
- ``{"type": "json_object"}``: no schema is given, so the tool takes ``PERMISSIVE_OBJECT`` (any JSON object).
- ``{"type": "text"}`` (or no ``response_format``): nothing changes.
- The tool is named ``json_response`` (``json_response_1``, ``_2``... when a client tool already has that name).
- With no client tools, or ``tool_choice: "none"``, the output tool is forced: the answer is the JSON.
- With client tools and ``tool_choice`` ``"auto"`` or unset, the output tool joins them and the model must call one
  of the tools: the output tool's call is the answer (``content``), a client tool's call comes back as ``tool_calls``
  (as vendorA does: tools first, the formatted answer once the model is done with them).
- When ``tool_choice`` forces a client tool (``"required"`` or a named function), structured output does not apply
  to this turn: no output tool is sent and the answer is that tool call.
- While the output tool is offered, text blocks of the answer are left out (a forced tool call comes without text;
  text beside it would break the JSON the client parses).
"""

from __future__ import annotations

from typing import Any

from gateway.http.errors import InvalidRequest

#: the input schema for ``json_object`` (and for tools rebuilt from history): any JSON object
PERMISSIVE_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
OUTPUT_TOOL_NAME = "json_response"
_DESCRIPTION = "Give the final answer to the user as the input of this tool: a JSON object"


class OutputTool:
    """The output tool of one request: its name, description and input schema, and whether it is forced."""

    __slots__ = ("name", "description", "schema", "forced")

    def __init__(self, name: str, description: str, schema: dict[str, Any], forced: bool) -> None:
        self.name = name
        self.description = description
        self.schema = schema
        self.forced = forced


def requested_schema(response_format: dict[str, Any] | None) -> tuple[dict[str, Any], str] | None:
    """(the object schema, a description for the model) a ``response_format`` asks for; None for plain text."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return PERMISSIVE_OBJECT, _DESCRIPTION + "."
    spec = response_format["json_schema"]  # json_schema, checked when the body was decoded
    schema = spec["schema"]
    if schema.get("type", "object") != "object":
        raise InvalidRequest("response_format.json_schema.schema must be an object schema ({\"type\": \"object\", "
                             "...}) for this provider", param="response_format.json_schema.schema")
    elif "type" not in schema:
        schema = {"type": "object", **schema}
    description = _DESCRIPTION
    name = spec.get("name")
    if isinstance(name, str) and name:
        description += f" following the schema '{name}'"
    extra = spec.get("description")
    description += f": {extra}" if isinstance(extra, str) and extra else "."
    return schema, description


def output_tool(request: Any) -> OutputTool | None:
    """The output tool a chat request needs (``None`` when it needs none); raises InvalidRequest for a bad format."""
    requested = requested_schema(request.response_format)
    if requested is None:
        return None
    schema, description = requested
    client = [t.function.name for t in request.tools] if request.tools else [
        f.name for f in getattr(request, "functions", None) or ()]
    choice = request.tool_choice if request.tool_choice is not None else getattr(request, "function_call", None)
    if client and (choice == "required" or isinstance(choice, dict)):
        return None
    name = OUTPUT_TOOL_NAME
    taken = set(client)
    n = 0
    while name in taken:
        n += 1
        name = f"{OUTPUT_TOOL_NAME}_{n}"
    return OutputTool(name, description, schema, forced=not client or choice == "none")


def output_tool_name(request: Any) -> str | None:
    """The name of the output tool offered for ``request`` (the answer side's question), or None."""
    if not getattr(request, "response_format", None):
        return None
    tool = output_tool(request)
    return tool.name if tool is not None else None
