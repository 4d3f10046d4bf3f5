"""What an images or audio answer counts, worked out from the bytes as they are relayed, never by decoding them.

An answer is relayed chunk by chunk (a base64 image answer of megabytes is never decoded); the meter keeps its
first and last few kilobytes and counts markers as the chunks pass:

- usage: the last ``"usage": {...}`` object of the answer (vendorA puts it after the images; a stream's final
  event carries it), as the provider reported it: tokens (``input_tokens`` / ``output_tokens``) or, for
  duration-billed transcriptions, ``{"type": "duration", "seconds": N}``;
- where the provider reports no usage: the image count (``b64_json`` / ``url`` members; a stream's
  ``*.completed`` events) and the audio seconds (a transcription's ``duration``; a speech answer in ``pcm``, 24 kHz
  16-bit mono, or ``wav``, from its size).

The result goes into the request's record as ``usage`` (a dict) with ``usage_source`` ``reported`` or ``counted``;
docs/images-and-audio.md says what the log line and metrics show.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateway.providers.base import AUDIO_SPEECH, IMAGES

EDGE_BYTES = 4096
#: pcm as vendorA sends it: 24 kHz, 16-bit, mono
PCM_BYTES_PER_S = 48_000
WAV_HEADER_BYTES = 44
_IMAGE_MARKERS = (b'"b64_json"', b'"url"')
_IMAGE_EVENT = re.compile(rb'"type"\s*:\s*"image_(?:generation|edit)\.completed"')
_USAGE = b'"usage"'
_DURATION = re.compile(rb'"duration"\s*:\s*([0-9.]+)')
_decode = msgspec.json.decode


class MediaMeter:
    """Fed every relayed chunk of one answer; ``result()`` gives ``(usage, usage_source)``."""

    __slots__ = ("endpoint", "sse", "audio_format", "head", "tail", "size", "images", "_carry")

    def __init__(self, endpoint: str, content_type: str, audio_format: str | None = None) -> None:
        self.endpoint = endpoint
        self.sse = content_type.startswith("text/event-stream")
        self.audio_format = audio_format
        self.head = b""
        self.tail = b""
        self.size = 0
        self.images = 0
        self._carry = b""

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if len(self.head) < EDGE_BYTES:
            self.head += chunk[:EDGE_BYTES - len(self.head)]
        self.tail = (self.tail + chunk)[-EDGE_BYTES:] if len(chunk) < EDGE_BYTES else chunk[-EDGE_BYTES:]
        if self.endpoint in IMAGES:
            # markers may straddle two chunks: look at the last few bytes of the previous one too
            window = self._carry + chunk
            self.images += self._count(window) - self._count(self._carry)
            self._carry = window[-64:]

    def _count(self, data: bytes) -> int:
        if self.sse:
            return len(_IMAGE_EVENT.findall(data))
        return sum(data.count(marker) for marker in _IMAGE_MARKERS)

    def result(self) -> tuple[Any, str]:
        usage = last_usage(self.tail)
        if usage is not None:
            if usage.get("type") == "duration" and "seconds" in usage:
                return {"audio_seconds": usage["seconds"]}, "reported"
            return usage, "reported"
        if self.endpoint in IMAGES:
            return ({"images": self.images}, "counted") if self.images else (None, "none")
        seconds = self._audio_seconds()
        return ({"audio_seconds": seconds}, "counted") if seconds is not None else (None, "none")

    def _audio_seconds(self) -> float | None:
        if self.endpoint == AUDIO_SPEECH:
            if self.sse:
                return None
            if self.audio_format == "pcm":
                return round(self.size / PCM_BYTES_PER_S, 3)
            if self.audio_format == "wav" and self.head[:4] == b"RIFF":
                rate = int.from_bytes(self.head[28:32], "little")
                return round((self.size - WAV_HEADER_BYTES) / rate, 3) if rate else None
            return None
        found = _DURATION.search(self.head)
        return float(found.group(1)) if found else None


def last_usage(data: bytes) -> dict[str, Any] | None:
    """The last ``"usage": {...}`` object in ``data`` (None when there is none, or it is cut or not JSON)."""
    at = data.rfind(_USAGE)
    while at >= 0:
        start = data.find(b"{", at + len(_USAGE))
        if start >= 0 and data[at + len(_USAGE):start].strip() in (b":",):
            end = _object_end(data, start)
            if end is not None:
                try:
                    doc = _decode(data[start:end])
                except msgspec.DecodeError:
                    doc = None
                if isinstance(doc, dict):
                    return doc
        at = data.rfind(_USAGE, 0, at)
    return None


def _object_end(data: bytes, start: int) -> int | None:
    depth = 0
    in_string = False
    i = start
    n = len(data)
    while i < n:
        c = data[i]
        if in_string:
            if c == 0x5C:  # backslash
                i += 1
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None
