"""A Realtime session's usage: summed from the ``response.usage`` of every ``response.done`` the provider sends.

Wire facts relied on (the Realtime API's server events, as ``gateway_mock/realtime.py`` records them): each
response ends with one ``response.done`` event whose ``response.usage`` is ``{total_tokens, input_tokens,
output_tokens, input_token_details: {cached_tokens, text_tokens, audio_tokens, image_tokens,
cached_tokens_details: {...}}, output_token_details: {text_tokens, audio_tokens}}`` (absent or null for a response
that used nothing). A frame is decoded only when its text holds ``response.done``: the deltas (most of a session's
frames) are only counted.

The sum is the record's ``usage`` as the recorder reads it (``input_tokens``, ``output_tokens``, ``total_tokens``:
``gateway/observability/entry.py`` ``tokens``; the policies settle token and cost budgets from the same three), with
the details beside them.
"""

from __future__ import annotations

from typing import Any

import msgspec

_MARK = "response.done"
_MARK_BYTES = b"response.done"


class _InputDetails(msgspec.Struct, gc=False):
    cached_tokens: int = 0
    text_tokens: int = 0
    audio_tokens: int = 0
    image_tokens: int = 0


class _OutputDetails(msgspec.Struct, gc=False):
    text_tokens: int = 0
    audio_tokens: int = 0


class _Usage(msgspec.Struct, gc=False):
    total_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    input_token_details: _InputDetails | None = None
    output_token_details: _OutputDetails | None = None


class _Response(msgspec.Struct, gc=False):
    usage: _Usage | None = None


class _Event(msgspec.Struct, gc=False):
    type: str = ""
    response: _Response | None = None


_decode_event = msgspec.json.Decoder(_Event).decode


class SessionUsage:
    """The usage of the responses seen so far, and how many there were."""

    __slots__ = ("responses", "reported", "input", "output", "total", "cached", "input_text", "input_audio",
                 "input_image", "output_text", "output_audio")

    def __init__(self) -> None:
        self.responses = 0
        #: True once a ``response.done`` carried usage
        self.reported = False
        self.input = self.output = self.total = self.cached = 0
        self.input_text = self.input_audio = self.input_image = self.output_text = self.output_audio = 0

    def read(self, frame: str | bytes) -> bool:
        """Add the usage of ``frame`` when it is a ``response.done`` (any other frame costs a substring search);
        True when it added some."""
        if isinstance(frame, str):
            if _MARK not in frame:
                return False
        elif _MARK_BYTES not in frame:
            return False
        try:
            event = _decode_event(frame)
        except msgspec.DecodeError:  # not the JSON the API sends: relayed as it is, counted as nothing
            return False
        if event.type != _MARK:
            return False
        self.responses += 1
        usage = event.response.usage if event.response is not None else None
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

    def as_record_usage(self) -> dict[str, Any] | None:
        """The record's ``usage`` (None when no response reported any)."""
        if not self.reported:
            return None
        return {
            "input_tokens": self.input, "output_tokens": self.output, "total_tokens": self.total,
            "input_token_details": {"cached_tokens": self.cached, "text_tokens": self.input_text,
                                    "audio_tokens": self.input_audio, "image_tokens": self.input_image},
            "output_token_details": {"text_tokens": self.output_text, "audio_tokens": self.output_audio},
        }
