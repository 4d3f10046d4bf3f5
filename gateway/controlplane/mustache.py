"""The mustache subset prompt templates use: compile once, render with variables, name the required ones.

The tags supported and refused, and how values render: docs/control-plane.md ("Prompt templates", the mustache
rules). Refused tags, unclosed or mismatched sections and a ``{{`` that no ``}}`` closes are a ``TemplateError``.

Whitespace is kept exactly: a tag is replaced where it stands (mustache's trimming of lines that hold only a
section tag is not done), so a template renders to the same characters whichever way its lines are broken.

Required variables: every variable interpolated outside any section (``{{name}}`` at the top level) must be given:
``render`` raises ``MissingVariable`` naming the first one missing. Section names and the variables inside
sections are optional (missing renders nothing), as in mustache.

Bounds: sections nest at most ``MAX_SECTION_DEPTH`` deep (a deeper template is a ``TemplateError`` when it is
compiled, so it is refused when it is created); a render (every text field of a prompt together, one
``RenderBudget``) visits at most ``MAX_RENDER_STEPS`` tags and literals and produces at most
``MAX_RENDERED_CHARS`` characters, else ``RenderLimit``. Nested sections over lists multiply: five sections over a
25-item list are ten million steps, which would hold the worker's event loop for seconds.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import msgspec

_TAG = re.compile(r"\{\{\{\s*(?P<raw>.*?)\s*\}\}\}|\{\{\s*(?P<sigil>[#^/!&]?)\s*(?P<name>.*?)\s*\}\}", re.S)
_NAME = re.compile(r"^(\.|[^\s{}#^/!&>=.][^\s{}]*)$")
_encode = msgspec.json.encode
_MISSING = object()

#: how deep sections may nest in a template
MAX_SECTION_DEPTH = 16
#: tags and literals one render may visit (about 50 ms of work)
MAX_RENDER_STEPS = 200_000
#: characters one render may produce
MAX_RENDERED_CHARS = 8 * 1024 * 1024


class TemplateError(ValueError):
    """The template text is not valid mustache (of the supported subset)."""


class RenderLimit(ValueError):
    """A render would do more work or produce more text than the limits allow; the message names the limit."""


class RenderBudget:
    """What is left of one render's limits; share one between the renders that make up one answer."""

    __slots__ = ("steps", "chars")

    def __init__(self, steps: int = MAX_RENDER_STEPS, chars: int = MAX_RENDERED_CHARS) -> None:
        self.steps = steps
        self.chars = chars

    def spend(self, steps: int, chars: int) -> None:
        self.steps -= steps
        self.chars -= chars
        if self.steps < 0:
            raise RenderLimit(f"rendering takes more than {MAX_RENDER_STEPS} steps (the limit): nested sections "
                              "over long lists multiply")
        if self.chars < 0:
            raise RenderLimit(f"the rendered text exceeds the limit of {MAX_RENDERED_CHARS} characters")


class MissingVariable(KeyError):
    """A required variable was not given; ``name`` names it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


# A compiled template is a list of nodes: str (literal text), ("var", path, required) or
# ("section", path, inverted, children).
Node = Any


def _path(name: str) -> tuple[str, ...]:
    return (".",) if name == "." else tuple(name.split("."))


def compile_template(text: str) -> list[Node]:
    """Parse ``text``; TemplateError says what is wrong and where (character offset)."""
    root: list[Node] = []
    stack: list[tuple[str, list[Node], int]] = []
    out = root
    pos = 0
    for match in _TAG.finditer(text):
        if match.start() > pos:
            out.append(_literal(text, pos, match.start()))
        pos = match.end()
        raw, sigil, name = match.group("raw", "sigil", "name")
        if raw is not None:
            sigil, name = "&", raw
        if sigil == "!":
            continue
        if name[:1] in (">", "="):
            raise TemplateError(f"partials and delimiter changes are not supported (at character {match.start()})")
        if not _NAME.match(name):
            raise TemplateError(f"invalid tag {match.group(0)!r} at character {match.start()}")
        if sigil in ("#", "^"):
            if len(stack) >= MAX_SECTION_DEPTH:
                raise TemplateError(f"sections nest deeper than {MAX_SECTION_DEPTH} (the limit) at character "
                                    f"{match.start()}")
            children: list[Node] = []
            out.append(("section", _path(name), sigil == "^", children))
            stack.append((name, out, match.start()))
            out = children
        elif sigil == "/":
            if not stack or stack[-1][0] != name:
                opened = f"; open section is {stack[-1][0]!r}" if stack else ""
                raise TemplateError(f"closing tag {{{{/{name}}}}} at character {match.start()} has no matching "
                                    f"opening tag{opened}")
            _, out, _ = stack.pop()
        else:
            out.append(("var", _path(name), not stack))
    if stack:
        name, _, start = stack[-1]
        raise TemplateError(f"section {{{{#{name}}}}} opened at character {start} is never closed")
    if pos < len(text):
        out.append(_literal(text, pos, len(text)))
    return root


def _literal(text: str, start: int, end: int) -> str:
    """The text between tags; a ``{{`` in it opens a tag that is never closed."""
    opened = text.find("{{", start, end)
    if opened >= 0:
        shown = text[opened:opened + 20]
        raise TemplateError(f"tag {shown!r} opened at character {opened} is never closed (no '}}}}')")
    return text[start:end]


def required_variables(nodes: Sequence[Node]) -> list[str]:
    """The variables a render must be given (top-level interpolations), in order of first use."""
    names: list[str] = []
    for node in nodes:
        if type(node) is tuple and node[0] == "var" and node[2]:
            name = ".".join(node[1])
            if name not in names:
                names.append(name)
    return names


def _lookup(stack: list[Any], path: tuple[str, ...]) -> Any:
    if path == (".",):
        return stack[-1]
    head = path[0]
    for frame in reversed(stack):
        if isinstance(frame, Mapping) and head in frame:
            value = frame[head]
            break
    else:
        return _MISSING
    for part in path[1:]:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _text(value: Any) -> str:
    if value is None or value is _MISSING:
        return ""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _encode(value).decode()


def _falsy(value: Any) -> bool:
    return value is _MISSING or value is None or value is False or value == "" or (
        isinstance(value, list) and not value)


def _render(nodes: Sequence[Node], stack: list[Any], out: list[str], budget: RenderBudget) -> None:
    for node in nodes:
        if type(node) is str:
            budget.spend(1, len(node))
            out.append(node)
            continue
        if node[0] == "var":
            value = _lookup(stack, node[1])
            if value is _MISSING and node[2]:
                raise MissingVariable(".".join(node[1]))
            text = _text(value)
            budget.spend(1, len(text))
            out.append(text)
            continue
        budget.spend(1, 0)
        _, path, inverted, children = node
        value = _lookup(stack, path)
        if inverted:
            if _falsy(value):
                _render(children, stack, out, budget)
        elif _falsy(value):
            continue
        elif isinstance(value, list):
            for item in value:
                budget.spend(1, 0)  # an item with nothing to render is work too
                stack.append(item)
                _render(children, stack, out, budget)
                stack.pop()
        else:
            stack.append(value)
            _render(children, stack, out, budget)
            stack.pop()


def render(nodes: Sequence[Node], variables: Mapping[str, Any], budget: RenderBudget | None = None) -> str:
    """The template's text with ``variables``; MissingVariable names a required variable that is not given,
    RenderLimit a limit the render would pass (``budget``: what is left of them, shared between renders)."""
    out: list[str] = []
    _render(nodes, [variables], out, budget if budget is not None else RenderBudget())
    return "".join(out)
