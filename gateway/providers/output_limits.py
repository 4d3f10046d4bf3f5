"""The most output tokens a model may be asked for, for the models the gateway knows (see
docs/front-doors.md#output-limits).

A front door that translates a request for another provider caps the request's output limit at the model's maximum
(a coding agent written for one provider asks ``max_tokens: 64000``; gpt-4o takes at most 16,384 and answers 400
above it). Facts relied on: each provider's public model pages (the "max output tokens" of each model, standard
tier, no beta headers). A model matches a listed name exactly, or the name followed by a snapshot suffix only (a
date such as ``-20240620``, ``-2024-08-06`` or ``@20240620``, ``-latest``, and a cloudA version such as ``-v1:0``),
so a newer model that merely starts with a listed name (``claude-opus-4-5`` after ``claude-opus-4``) is not capped
by the older one's figure: an unknown model is never capped.
"""

from __future__ import annotations

import re

#: model name -> the most output tokens it may be asked for
MAX_OUTPUT_TOKENS: dict[str, int] = {
    # vendorA
    "gpt-4o": 16_384,
    "gpt-4o-mini": 16_384,
    "gpt-4.1": 32_768,
    "gpt-4.1-mini": 32_768,
    "gpt-4.1-nano": 32_768,
    "gpt-4-turbo": 4_096,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 4_096,
    "o1": 100_000,
    "o1-mini": 65_536,
    "o3": 100_000,
    "o3-mini": 100_000,
    "o4-mini": 100_000,
    # anthropic (cloudC serves the same names with an ``@date`` snapshot)
    "claude-3-haiku": 4_096,
    "claude-3-opus": 4_096,
    "claude-3-5-haiku": 8_192,
    "claude-3-5-sonnet": 8_192,
    "claude-3-5-sonnet-v2": 8_192,
    "claude-3-7-sonnet": 64_000,
    "claude-sonnet-4": 64_000,
    "claude-opus-4": 32_000,
    "claude-opus-4-1": 32_000,
    # cloudA (model ids as Converse takes them)
    "meta.llama3-8b-instruct": 2_048,
    "meta.llama3-70b-instruct": 2_048,
    "anthropic.claude-3-haiku": 4_096,
    "anthropic.claude-3-5-haiku": 8_192,
    "anthropic.claude-3-5-sonnet": 8_192,
    # cloudC
    "gemini-1.5-flash": 8_192,
    "gemini-1.5-pro": 8_192,
    "gemini-2.0-flash": 8_192,
    "gemini-2.0-flash-lite": 8_192,
    "gemini-2.5-flash": 65_536,
    "gemini-2.5-pro": 65_536,
}

#: what may follow a listed name: a dated snapshot, ``latest``, a cloudC revision (``-001``), a cloudA version, in
#: that order, each optional; a cloudA cross-region prefix (``us.``, ``eu.``, ``apac.``) may precede it
_MODEL = re.compile(r"(?:(?:us|eu|apac)\.)?(?P<name>.+?)(?:[-@]\d{4}-?\d{2}-?\d{2})?(?:-latest)?(?:-\d{3})?"
                    r"(?:-v\d+(?::\d+)?)?")
#: longer names are no model any provider lists (and are not worth matching)
_LONGEST = 128


def max_output_tokens(model: str | None) -> int | None:
    """The most output tokens ``model`` may be asked for, or None when the gateway does not know the model."""
    if not model or len(model) > _LONGEST:
        return None
    known = MAX_OUTPUT_TOKENS.get(model)
    if known is not None:
        return known
    match = _MODEL.fullmatch(model)
    return MAX_OUTPUT_TOKENS.get(match.group("name")) if match is not None else None
