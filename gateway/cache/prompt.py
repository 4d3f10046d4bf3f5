"""What of a request the semantic cache embeds, and what of it must match exactly instead.

The embedded text is the last message's text when that message is the user's (a chat) or the prompt (a
completion), up to ``EMBED_CHARS`` characters cut at a space. Everything else that reaches the model must match
exactly, so it goes into ``context``, a digest the cache adds to the partition key: the earlier messages (system
prompt and every earlier turn, whole), the rest of a long last message, its non-text parts (images, audio, files)
and its ``name``. A follow-up question is then matched only after the same conversation, and no text of the
conversation is ever ignored: it is either compared by meaning (and by its literals, see ``literals.py``) or
byte for byte.

The 400 characters stay inside the model's 128-token window for ordinary text (about 80–100 tokens of English),
so the window's truncation rarely applies; in scripts with a token a character (Chinese, Japanese) the text past
the 126th token does not move the vector, but its numbers and quoted strings still have to agree.

No semantic step (``None``) when the last message is not the user's (a tool result, an assistant prefill) or has
no text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from gateway.cache.literals import literals

EMBED_CHARS = 400

_encode = msgspec.json.Encoder().encode


class SemanticPrompt(msgspec.Struct, frozen=True, gc=False):
    """The embedded ``text``, its ``literals`` (for the guard) and the ``context`` digest that must match exactly."""

    text: str
    context: bytes
    literals: tuple[str, ...]


def chat_prompt(messages: Sequence[Any]) -> SemanticPrompt | None:
    """The semantic part of a chat request's ``messages`` (msgspec ``Message`` structs or plain dicts)."""
    if not messages:
        return None
    last = messages[-1]
    if _field(last, "role") != "user":
        return None
    text, other_parts = _text_and_parts(_field(last, "content"))
    head, tail = _split(text)
    if not head:
        return None
    rest = {k: v for k in ("name", "tool_calls", "tool_call_id") if (v := _field(last, k)) is not None}
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_encode(list(messages[:-1])))
    digest.update(b"\x00")
    digest.update(_encode([tail, other_parts, rest]))
    return SemanticPrompt(head, digest.digest(), literals(head))


def completion_prompt(prompt: Any) -> SemanticPrompt | None:
    """The semantic part of a completions request's ``prompt`` (a string; token arrays and lists are exact only)."""
    if not isinstance(prompt, str):
        return None
    head, tail = _split(prompt)
    if not head:
        return None
    digest = hashlib.blake2b(_encode(["completion", tail]), digest_size=16).digest()
    return SemanticPrompt(head, digest, literals(head))


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _text_and_parts(content: Any) -> tuple[str, list[Any]]:
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        return "", []
    texts: list[str] = []
    others: list[Any] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            others.append(part)
    return "\n".join(texts), others


def _split(text: str) -> tuple[str, str]:
    """(the head that is embedded, the tail that must match exactly); the head is stripped."""
    text = text.strip()
    if len(text) <= EMBED_CHARS:
        return text, ""
    cut = text.rfind(" ", EMBED_CHARS // 2, EMBED_CHARS + 1)
    if cut < 0:
        cut = EMBED_CHARS
    return text[:cut].rstrip(), text[cut:]
