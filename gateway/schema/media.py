"""The images and audio request bodies, checked only as far as routing, guardrails and logs need them.

JSON bodies (``/v1/images/generations``, ``/v1/audio/speech``) are decoded here; multipart ones arrive as their
form fields made a JSON object (``gateway/pipeline/media_form.py``), whose text values are converted (``"2"`` to 2,
``"true"`` to True). Other fields are forwarded as sent: the provider judges them. Field facts: vendorA's API
reference (docs/images-and-audio.md links it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.schema.common import BodyDecoder, validation_error

T = TypeVar("T")
ImageCount = Annotated[int, msgspec.Meta(ge=1, le=10)]


class ImageRequest(msgspec.Struct, frozen=True):
    """``/v1/images/generations`` (JSON) and ``/edits`` (form): a prompt; ``/variations`` (form) has none."""

    prompt: str | None = None
    model: str | None = None
    n: ImageCount | None = None
    response_format: Literal["url", "b64_json"] | None = None
    size: str | None = None
    stream: bool = False
    user: str | None = None


class TranscriptionRequest(msgspec.Struct, frozen=True):
    """``/v1/audio/transcriptions`` and ``/translations`` (form fields beside the ``file`` part)."""

    model: str
    language: str | None = None
    prompt: str | None = None
    response_format: Literal["json", "text", "srt", "verbose_json", "vtt"] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    stream: bool = False


class SpeechRequest(msgspec.Struct, frozen=True):
    """``/v1/audio/speech``: the text to speak, a voice, and the audio format (or ``stream_format: sse``)."""

    model: str
    input: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    voice: Any
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] | None = None
    speed: Annotated[float, msgspec.Meta(ge=0.25, le=4.0)] | None = None
    stream_format: Literal["sse", "audio"] | None = None
    instructions: str | None = None

    @property
    def stream(self) -> bool:
        return self.stream_format == "sse"


_images = BodyDecoder(ImageRequest)
_speech = BodyDecoder(SpeechRequest)
_decode = msgspec.json.decode


def _prompted(request: ImageRequest) -> ImageRequest:
    if not request.prompt:
        raise InvalidRequest("prompt is required (a non-empty string)", param="prompt")
    return request


def parse_image_generation(body: bytes) -> ImageRequest:
    return _prompted(_images.decode(body))


def _form(body: bytes, type_: type[T]) -> T:
    try:
        return msgspec.convert(_decode(body), type_, strict=False)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, "form") from None


def parse_image_edit(body: bytes) -> ImageRequest:
    return _prompted(_form(body, ImageRequest))


def parse_image_variation(body: bytes) -> ImageRequest:
    return _form(body, ImageRequest)


def parse_transcription(body: bytes) -> TranscriptionRequest:
    return _form(body, TranscriptionRequest)


def parse_speech(body: bytes) -> SpeechRequest:
    request = _speech.decode(body)
    if request.voice is None or request.voice == "":
        raise InvalidRequest("voice is required", param="voice")
    return request
