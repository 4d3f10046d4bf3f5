"""A session's usage: summed from the ``response.usage`` of every event that ends a response (the Realtime API's
``response.done``; the Responses WebSocket mode's ``response.completed`` and ``response.incomplete``).

Wire facts relied on (the Realtime API's server events, as ``gateway_mock/realtime.py`` records them): each
response ends with one ``response.done`` event whose ``response.usage`` is ``{total_tokens, input_tokens,
output_tokens, input_token_details: {cached_tokens, text_tokens, audio_tokens, image_tokens,
cached_tokens_details: {...}}, output_token_details: {text_tokens, audio_tokens}}`` (absent or null for a response
that used nothing). The Responses WebSocket mode (``gateway_mock/responses_ws.py``) ends each response with
``response.completed`` (``response.incomplete`` when it was cut short) whose ``response.usage`` is ``{input_tokens,
input_tokens_details: {cached_tokens}, output_tokens, output_tokens_details: {reasoning_tokens}, total_tokens}`` and
whose ``response.model`` names the model that answered. A frame is decoded only when its text holds one of the
dialect's ending event names: the deltas (most of a session's frames) are only counted.

The sum is the record's ``usage`` as the recorder reads it (``input_tokens``, ``output_tokens``, ``total_tokens``:
``gateway/observability/entry.py`` ``tokens``; the policies settle token and cost budgets from the same three), with
the details beside them.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: the event that ends a Realtime response
REALTIME_ENDS = ("response.done",)
#: the events that end a response of the Responses WebSocket mode (both carry the response's usage)
RESPONSES_ENDS = ("response.completed", "response.incomplete")


class _InputDetails(msgspec.Struct, gc=False):
    cached_tokens: int = 0
    text_tokens: int = 0
    audio_tokens: int = 0
    image_tokens: int = 0


class _OutputDetails(msgspec.Struct, gc=False):
    text_tokens: int = 0
    audio_tokens: int = 0


class _ResponsesInputDetails(msgspec.Struct, gc=False):
    cached_tokens: int = 0


class _ResponsesOutputDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int = 0


class _Usage(msgspec.Struct, gc=False):
    total_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: the Realtime API's details
    input_token_details: _InputDetails | None = None
    output_token_details: _OutputDetails | None = None
    #: the Responses API's details
    input_tokens_details: _ResponsesInputDetails | None = None
    output_tokens_details: _ResponsesOutputDetails | None = None


class _Response(msgspec.Struct, gc=False):
    usage: _Usage | None = None
    model: str | None = None


class _Event(msgspec.Struct, gc=False):
    type: str = ""
    response: _Response | None = None


_decode_event = msgspec.json.Decoder(_Event).decode


# plain loops, not any() over a generator: they run on every frame a provider sends (a delta's check costs 0.3 us
# instead of 0.8 us on the bench VM)
def _holds_text(frame: str, names: tuple[str, ...]) -> bool:
    for name in names:
        if name in frame:
            return True
    return False


def _holds_bytes(frame: bytes, names: tuple[bytes, ...]) -> bool:
    for name in names:
        if name in frame:
            return True
    return False


class SessionUsage:
    """The usage of the responses seen so far, and how many there were; ``ends``: the event types that end a
    response and carry its usage."""

    __slots__ = ("ends", "_ends_bytes", "responses", "reported", "model", "input", "output", "total", "cached",
                 "input_text", "input_audio", "input_image", "output_text", "output_audio", "reasoning")

    def __init__(self, ends: tuple[str, ...] = REALTIME_ENDS) -> None:
        self.ends = ends
        self._ends_bytes = tuple(end.encode() for end in ends)
        self.responses = 0
        #: the model the last response named (None when none did)
        self.model: str | None = None
        #: True once a ``response.done`` carried usage
        self.reported = False
        self.input = self.output = self.total = self.cached = 0
        self.input_text = self.input_audio = self.input_image = self.output_text = self.output_audio = 0
        self.reasoning = 0

    def read(self, frame: str | bytes) -> bool:
        """Add the usage of ``frame`` when it ends a response (any other frame costs a substring search or two);
        True when it added some."""
        if not (_holds_text(frame, self.ends) if isinstance(frame, str) else _holds_bytes(frame, self._ends_bytes)):
            return False
        try:
            event = _decode_event(frame)
        except msgspec.DecodeError:  # not the JSON the API sends: relayed as it is, counted as nothing
            return False
        if event.type not in self.ends:
            return False
        self.responses += 1
        response = event.response
        if response is not None and response.model:
            self.model = response.model
        usage = response.usage if response is not None else None
        if usage is None:
            return False
        self.add(usage)
        return True

    def add(self, usage: _Usage) -> None:
        self.reported = True
        self.input += usage.input_tokens
        self.output += usage.output_tokens
        self.total += usage.total_tokens or usage.input_tokens + usage.output_tokens
        details = usage.input_token_details
        if details is not None:
            self.cached += details.cached_tokens
            self.input_text += details.text_tokens
            self.input_audio += details.audio_tokens
            self.input_image += details.image_tokens
        out = usage.output_token_details
        if out is not None:
            self.output_text += out.text_tokens
            self.output_audio += out.audio_tokens
        if usage.input_tokens_details is not None:
            self.cached += usage.input_tokens_details.cached_tokens
        if usage.output_tokens_details is not None:
            self.reasoning += usage.output_tokens_details.reasoning_tokens

    def as_record_usage(self) -> dict[str, Any] | None:
        """The record's ``usage`` in the dialect's own shape (None when no response reported any)."""
        if not self.reported:
            return None
        if self.ends is not REALTIME_ENDS:  # the Responses API's shape
            return {"input_tokens": self.input, "output_tokens": self.output, "total_tokens": self.total,
                    "input_tokens_details": {"cached_tokens": self.cached},
                    "output_tokens_details": {"reasoning_tokens": self.reasoning}}
        return {
            "input_tokens": self.input, "output_tokens": self.output, "total_tokens": self.total,
            "input_token_details": {"cached_tokens": self.cached, "text_tokens": self.input_text,
                                    "audio_tokens": self.input_audio, "image_tokens": self.input_image},
            "output_token_details": {"text_tokens": self.output_text, "audio_tokens": self.output_audio},
        }
