"""The gateway's own token estimate, for requests whose provider reported no usage (``usage_source: estimated``).

Used when a chat or completion answer carries no usage: a stream the client left or that broke off before the
provider's usage chunk, a provider that ignores ``stream_options.include_usage``, a JSON answer without ``usage``.
It runs in the recorder's background task, never on the request path. The rule of thumb is four characters of
text a token (about right for English with vendorA's tokenisers; code and other languages differ):

- prompt: the characters of the request's text (message contents and text parts, names, tool-call arguments, the
  tool definitions as JSON; a completion's prompt strings, or one token per item of a token-array prompt; a front
  door's turns or input, ``system`` or ``instructions`` and tools) / 4, plus 3 tokens per message for the chat
  framing;
- completion: the characters of text the answer carried, read from its decoded JSON (so any whitespace and any
  escaping count the same): the string values of ``content``, ``text``, ``arguments``, ``reasoning_content``,
  ``refusal``, ``thinking`` and ``partial_json`` (anthropic's tool input as it streams), and a string ``delta`` (the
  Responses API's delta events; its other ``response.*`` events repeat text already counted and are skipped) / 4.
  For a stream, the pipeline keeps (a reference to) every chunk it relayed to the client, whichever path and
  dialect relayed it, up to HEAD_BYTES, and only counts the bytes and events relayed past them: the events of the
  kept head are decoded and their text counted exactly (here, off the request path, and only for a stream without
  the provider's usage), and the rest is its bytes minus each event's envelope, measured on the head's content
  event with the smallest envelope.

Each count is rounded up; a side with no text counts 0.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.schema.common import Usage

CHARS_PER_TOKEN = 4
#: the relayed bytes a stream keeps for the estimate (whole chunks, so possibly a chunk more; small, since a worker
#: holds thousands of streams at once); past them it only counts bytes and events
HEAD_BYTES = 8 * 1024
MESSAGE_OVERHEAD_TOKENS = 3
#: the keys whose string values are text the model wrote (see the module docstring)
_TEXT_KEYS = frozenset({"content", "text", "arguments", "reasoning_content", "refusal", "thinking", "partial_json"})
#: how deep the text is looked for (a chunk's tool-call arguments sit at depth 5; a hostile upstream's event
#: nested thousands deep is not walked)
_MAX_DEPTH = 12
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def text_chars(data: bytes) -> int:
    """The characters of text (see the module docstring) in one JSON document (0 when it does not decode)."""
    try:
        doc = _decode(data)
    except (msgspec.DecodeError, RecursionError, ValueError):
        return 0
    return doc_text_chars(doc)


def doc_text_chars(doc: Any, depth: int = 0) -> int:
    """The characters of text in a decoded JSON document: an answer, a unified chunk or a dialect's event."""
    if depth > _MAX_DEPTH:
        return 0
    if isinstance(doc, list):
        return sum(doc_text_chars(item, depth + 1) for item in doc)
    if not isinstance(doc, dict):
        return 0
    kind = doc.get("type")
    if isinstance(kind, str) and kind.startswith("response."):  # a Responses event: only its deltas are new text
        delta = doc.get("delta")
        return len(delta) if isinstance(delta, str) else 0
    total = 0
    for key, value in doc.items():
        if isinstance(value, str):
            if key in _TEXT_KEYS or key == "delta":
                total += len(value)
        elif isinstance(value, (dict, list)):
            total += doc_text_chars(value, depth + 1)
    return total


def event_text_chars(event: bytes) -> int:
    """The characters of text in one SSE event (its ``data:`` lines, decoded; ``[DONE]`` and non-JSON count 0)."""
    lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
    if not lines:
        return 0
    data = lines[0] if len(lines) == 1 else b"\n".join(lines)
    if not data or data == b"[DONE]":
        return 0
    return text_chars(data)


def tokens_for(chars: int) -> int:
    return -(-max(0, chars) // CHARS_PER_TOKEN)


def prompt_tokens(request: Any) -> int:
    """Estimated prompt tokens of a decoded chat or completion request (0 for anything else)."""
    if request is None:
        return 0
    doc = getattr(request, "doc", None)
    if isinstance(doc, dict):  # a front door's request, as the client sent it (Messages or Responses API)
        return _door_prompt_tokens(doc)
    messages = getattr(request, "messages", None)
    if messages is not None:
        chars = 0
        for message in messages:
            content = message.content
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                for part in content:
                    text = part.get("text") if isinstance(part, dict) else None
                    if isinstance(text, str):
                        chars += len(text)
            if message.name:
                chars += len(message.name)
            for call in message.tool_calls or ():
                if call.function is not None:
                    chars += len(call.function.name or "") + len(call.function.arguments or "")
        tools = getattr(request, "tools", None)
        if tools:
            chars += len(_encode(tools))
        return tokens_for(chars) + MESSAGE_OVERHEAD_TOKENS * len(messages)
    prompt = getattr(request, "prompt", None)
    if isinstance(prompt, str):
        return tokens_for(len(prompt))
    if isinstance(prompt, list):
        count = 0
        for item in prompt:
            if isinstance(item, str):
                count += tokens_for(len(item))
            elif isinstance(item, list):
                count += len(item)
            else:
                count += 1
        return count
    return 0


def _door_prompt_tokens(doc: dict[str, Any]) -> int:
    """Estimated prompt tokens of a Messages or Responses API body: the text of its turns (or input string), its
    ``system`` / ``instructions``, the tools as JSON, plus the framing of each turn."""
    turns = doc.get("messages")
    if turns is None:
        turns = doc.get("input")
    chars = len(turns) if isinstance(turns, str) else doc_text_chars(turns)
    for key in ("system", "instructions"):
        value = doc.get(key)
        chars += len(value) if isinstance(value, str) else doc_text_chars(value)
    tools = doc.get("tools")
    if tools:
        chars += len(_encode(tools))
    return tokens_for(chars) + MESSAGE_OVERHEAD_TOKENS * (len(turns) if isinstance(turns, list) else 1)


def relayed_text_chars(head: bytes | None, rest_bytes: int = 0, rest_events: int = 0) -> int:
    """The text characters of a stream from what the pipeline kept and counted while relaying it (see the docstring).

    ``head`` is the start of what was relayed (every event of it reached the client): its text is counted exactly.
    ``rest_bytes`` and ``rest_events`` are what was relayed past it: its bytes minus an envelope per event, the
    envelope measured as the smallest of the head's events that carry text (a plain content event: an opening event
    that carries the role as well as text, as cloudC's does, has a larger one); a head without text means none went
    out.
    """
    if not head:
        return 0
    exact, envelope = 0, -1
    for event in head.replace(b"\r\n", b"\n").split(b"\n\n"):
        if event:
            chars = event_text_chars(event)
            exact += chars
            if chars and (envelope < 0 or len(event) + 2 - chars < envelope):
                envelope = len(event) + 2 - chars  # with its blank-line terminator
    if envelope < 0 or rest_bytes <= 0 or rest_events <= 0:
        return exact
    return exact + max(0, rest_bytes - rest_events * envelope)


def estimate(request: Any, completion_chars: int) -> Usage:
    """The estimated usage of a request whose answer held ``completion_chars`` characters of text."""
    prompt = prompt_tokens(request)
    completion = tokens_for(completion_chars)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)
