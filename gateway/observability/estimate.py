"""The gateway's own token estimate, for requests whose provider reported no usage (``usage_source: estimated``).

Used when a chat or completion answer carries no usage: a stream the client left or that broke off before the
provider's usage chunk, a provider that ignores ``stream_options.include_usage``, a JSON answer without ``usage``.
It runs in the recorder's background task, never on the request path. The rule of thumb is four characters of
text a token (about right for English with vendorA's tokenisers; code and other languages differ):

- prompt: the characters of the request's text (message contents and text parts, names, tool-call arguments, the
  tool definitions as JSON; a completion's prompt strings, or one token per item of a token-array prompt) / 4,
  plus 3 tokens per message for the chat framing;
- completion: the characters of text the answer carried (``content``, ``text``, ``arguments`` and
  ``reasoning_content`` values, as JSON-escaped bytes) / 4. For a stream, the pipeline keeps (a reference to) every
  chunk it relayed to the client, whichever path relayed it, up to HEAD_BYTES, and only counts the bytes and events
  relayed past them: the text of the kept head is counted exactly (here, off the request path, and only for a
  stream without the provider's usage), and the rest is its bytes minus each event's envelope, measured on the
  head's content event with the smallest envelope.

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
_TEXT_KEYS = (b'"content":"', b'"text":"', b'"arguments":"', b'"reasoning_content":"')
_encode = msgspec.json.encode


def text_chars(data: bytes) -> int:
    """The length of the text values (content, text, arguments, reasoning_content) in JSON bytes."""
    total = 0
    for key in _TEXT_KEYS:
        at = data.find(key)
        while at >= 0:
            start = at + len(key)
            end = data.find(b'"', start)
            while end > 0 and _escaped(data, end):
                end = data.find(b'"', end + 1)
            if end < 0:
                break
            total += end - start
            at = data.find(key, end)
    return total


def _escaped(data: bytes, quote: int) -> bool:
    """Whether the quote at ``quote`` is escaped (an odd run of backslashes before it)."""
    run = 0
    at = quote - 1
    while at >= 0 and data[at] == 92:
        run += 1
        at -= 1
    return run % 2 == 1


def tokens_for(chars: int) -> int:
    return -(-max(0, chars) // CHARS_PER_TOKEN)


def prompt_tokens(request: Any) -> int:
    """Estimated prompt tokens of a decoded chat or completion request (0 for anything else)."""
    if request is None:
        return 0
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
    for event in head.split(b"\n\n"):
        if event:
            chars = text_chars(event)
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
