"""The one reading of msgspec's decode errors, and the one JSON-path join: a ``ValidationError`` becomes the JSON
path of the field at fault and what is wrong with it (``DecodeFault``), which each caller words in its route's
error (a request body's 400, a config's ``invalid config: <path>: ...``, a guardrail parameter, a setting).

msgspec says ``Object contains unknown field `x` - at `$.a[0]```; the fault is then ``kind="unknown"``,
``path="a[0].x"``. The kinds: ``unknown`` (a field the type does not have), ``missing`` (a required field absent),
``type`` (``want`` and ``got`` in words: ``an integer``, ``a string``) and ``invalid`` (any other complaint; a
bound reads ``must be an integer >= 1``, anything else is msgspec's text made to follow a colon). The words every
route uses after ``<path>: `` are ``problem_words``' (docs/http-api.md, Errors)."""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from gateway.http.errors import mid_sentence

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]*)`$")
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`$")
#: a constraint: ``Expected `int` >= 1``, ``Expected `str` of length <= 64``
_BOUND = re.compile(r"^Expected `(?P<want>[^`]*)` (?P<rule>[^`]+)$")
#: msgspec's type names in words
_KINDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}

FaultKind = Literal["unknown", "missing", "type", "invalid"]


class DecodeFault(msgspec.Struct, frozen=True):
    """What a decoder refused: where (a JSON path, ``""`` for the document itself) and why."""

    kind: FaultKind
    path: str
    #: msgspec's complaint (without its location), to follow a colon
    detail: str
    #: for ``type``: what the field must be and what it was, in words
    want: str = ""
    got: str = ""


def join_path(base: str, tail: str) -> str:
    """``base`` and a path below it (``key``, ``.key``, ``[i]``, ``a.b[0]``) as one JSON path (``a.b``, ``a[0]``)."""
    if tail.startswith("."):
        tail = tail[1:]
    if not base:
        return tail
    if not tail:
        return base
    return base + tail if tail[0] == "[" else f"{base}.{tail}"


def kind_words(msgspec_type: str) -> str:
    """A msgspec type (``int | null``) in words (``an integer``); a number that may be an int is ``a number``."""
    parts = [p for p in msgspec_type.split(" | ") if p != "null"] or ["null"]
    if "int" in parts and "float" in parts:
        parts = [p for p in parts if p != "int"]
    return " or ".join(_KINDS.get(p, f"`{p}`") for p in parts)


def read_fault(exc: msgspec.MsgspecError, base: str = "") -> DecodeFault:
    """The fault a msgspec error names, its path joined under ``base`` (where the decoded value sits)."""
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any text
    message = match.group("msg")
    path = join_path(base, (match.group("path") or "").replace("[...]", ""))
    if found := _UNKNOWN.match(message):
        return DecodeFault("unknown", join_path(path, found.group("key")), message)
    if found := _MISSING.match(message):
        return DecodeFault("missing", join_path(path, found.group("key")), message)
    if found := _EXPECTED.match(message):
        return DecodeFault("type", path, mid_sentence(message), kind_words(found.group("want")),
                           kind_words(found.group("got")))
    if found := _BOUND.match(message):
        return DecodeFault("invalid", path, f"must be {kind_words(found.group('want'))} {found.group('rule')}")
    return DecodeFault("invalid", path, mid_sentence(message))


def problem_words(fault: DecodeFault) -> str:
    """What is wrong with the field, in the words every error after ``<path>: `` uses (``unknown key``, ``is
    required``, ``must be an integer, got a string``, ``must be an integer >= 1``, or msgspec's own words)."""
    if fault.kind == "unknown":
        return "unknown key"
    if fault.kind == "missing":
        return "is required"
    if fault.kind == "type":
        return f"must be {fault.want}, got {fault.got}"
    return fault.detail
