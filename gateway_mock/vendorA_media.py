"""Mock of vendorA's images and audio APIs: generations, edits, variations, transcriptions, translations, speech.

Wire facts (vendorA's API reference and the openai-python types ``ImagesResponse``, ``ImageGenCompletedEvent``,
``Transcription``, ``TranscriptionTextDeltaEvent`` / ``DoneEvent``, ``SpeechAudioDeltaEvent`` / ``DoneEvent``):

- ``POST /v1/images/generations`` takes JSON (``prompt`` required, ``model``, ``n``, ``size`` ``WxH``,
  ``response_format`` ``url`` | ``b64_json``, ``stream``, ``partial_images``); ``/images/edits`` (``image`` or
  ``image[]`` file parts, optional ``mask``, ``prompt`` required) and ``/images/variations`` (``image``) take
  multipart forms. The answer is ``{"created", "data": [{"b64_json"} | {"url"}, ...]}``; the GPT image models
  (``gpt-image-*``) always answer base64 and add ``usage`` (``input_tokens``, ``input_tokens_details``,
  ``output_tokens``, ``total_tokens``) after ``data``; dall-e models default to ``url`` and report no usage. With
  ``stream`` (GPT image models only) the answer is SSE: ``image_generation.partial_image`` events
  (``image_edit.*`` for edits) then ``image_generation.completed`` with ``b64_json`` and ``usage``.
- ``POST /v1/audio/transcriptions`` / ``/translations``: multipart, ``file`` and ``model`` required;
  ``response_format`` ``json`` (default: ``{"text", "usage"}``), ``text`` / ``srt`` / ``vtt`` (text/plain), or
  ``verbose_json`` (``task``, ``language``, ``duration``, ``text``, ``segments``). ``whisper-1`` reports usage as
  ``{"type": "duration", "seconds"}``, the GPT transcribe models as ``{"type": "tokens", input_tokens,
  output_tokens, total_tokens}``; ``stream=true`` (not whisper-1) answers SSE ``transcript.text.delta`` events and a
  ``transcript.text.done`` with the text and usage. Translations answer English text, no streaming.
- ``POST /v1/audio/speech``: JSON (``model``, ``input`` up to 4096 characters, ``voice`` required;
  ``response_format`` mp3 (default), opus, aac, flac, wav, pcm: 24 kHz 16-bit mono little-endian); the binary
  body is sent in pieces as it is made (chunked). ``stream_format: "sse"`` (not tts-1 / tts-1-hd) answers
  ``speech.audio.delta`` events (base64 ``audio``) and a ``speech.audio.done`` with ``usage``.

Content is made up but well-formed where cheap: PNG images of the asked size (one grey byte a pixel, stored
uncompressed, so a 1024x1024 image is about 1 MB, 1.4 MB in base64), WAV/PCM audio of 0.4 s a word of input,
MP3 as 128 kbit/s frames. A step's ``chunks`` and ``chunk_delay_ms`` pace the speech body; ``reply`` is the
transcript.
"""

from __future__ import annotations

import base64
import random
import re
import struct
import time
import zlib
from typing import Any

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, count_tokens, end_stream, respond, respond_json, sse, stream_part
from gateway_mock.multipart import FormError, parse_form

_SIZE = re.compile(r"^(\d{2,4})x(\d{2,4})$")
_GPT_IMAGE = "gpt-image-"
PCM_RATE = 24_000
SECONDS_A_WORD = 0.4
MP3_FRAME = b"\xff\xfb\x90\x64" + bytes(413)  # MPEG-1 layer III, 128 kbit/s, 44.1 kHz: 417 bytes, 26 ms
_AUDIO_TYPES = {"mp3": b"audio/mpeg", "opus": b"audio/ogg", "aac": b"audio/aac", "flac": b"audio/flac",
                "wav": b"audio/wav", "pcm": b"audio/pcm"}
DEFAULT_TRANSCRIPT = "The quick brown fox jumps over the lazy dog."


def invalid(message: str, param: str | None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def png(width: int, height: int, seed: int) -> bytes:
    """A valid greyscale PNG, stored uncompressed (its size is about ``width * height`` bytes)."""
    rows = random.Random(seed).randbytes(width * height)
    raw = b"".join(b"\x00" + rows[y * width:(y + 1) * width] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")


def _image_usage(prompt: str, n: int, width: int, height: int, images_in: int = 0) -> dict:
    text = count_tokens(prompt)
    image_in = images_in * 65
    output = n * max(1, width * height // 1024)
    return {"input_tokens": text + image_in, "input_tokens_details": {"image_tokens": image_in, "text_tokens": text},
            "output_tokens": output, "total_tokens": text + image_in + output}


def _size(value: Any) -> tuple[int, int] | None:
    if value in (None, "auto"):
        return 1024, 1024
    match = _SIZE.match(str(value))
    return (int(match.group(1)), int(match.group(2))) if match else None


async def _images(req: MockRequest, send: Send, fields: dict[str, Any], kind: str, images_in: int) -> None:
    model = str(fields.get("model") or ("gpt-image-1" if kind == "edit" else "dall-e-2"))
    prompt = str(fields.get("prompt") or "")
    if kind != "variation" and not prompt:
        await respond_json(send, 400, invalid("Missing required parameter: 'prompt'.", "prompt",
                                              "missing_required_parameter"))
        return
    try:
        n = int(fields.get("n") or 1)
    except ValueError:
        n = 0
    if not 1 <= n <= 10:
        await respond_json(send, 400, invalid(f"Invalid 'n': {fields.get('n')!r}; expected 1 to 10.", "n"))
        return
    size = _size(fields.get("size"))
    if size is None:
        await respond_json(send, 400, invalid(f"Invalid 'size': {fields.get('size')!r}.", "size"))
        return
    gpt = model.startswith(_GPT_IMAGE)
    b64 = gpt or fields.get("response_format") == "b64_json"
    created = int(time.time())
    seed = zlib.crc32(prompt.encode())
    if str(fields.get("stream")).lower() == "true":
        if not gpt:
            await respond_json(send, 400, invalid(f"Streaming is not supported for model {model}.", "stream"))
            return
        await _image_stream(req, send, kind, prompt, n, size, images_in, int(fields.get("partial_images") or 0))
        return
    data = []
    for i in range(n):
        if b64:
            data.append({"b64_json": base64.b64encode(png(size[0], size[1], seed + i)).decode()})
        else:
            data.append({"url": f"https://images.mock.invalid/img-{seed + i:x}.png"})
        if model == "dall-e-3":
            data[-1]["revised_prompt"] = prompt
    doc: dict[str, Any] = {"created": created, "data": data}
    if gpt:
        doc.update({"background": "opaque", "output_format": "png", "quality": "medium",
                    "size": f"{size[0]}x{size[1]}", "usage": _image_usage(prompt, n, *size, images_in)})
    await respond_json(send, 200, doc)


async def _image_stream(req: MockRequest, send: Send, kind: str, prompt: str, n: int, size: tuple[int, int],
                        images_in: int, partials: int) -> None:
    prefix = "image_generation" if kind == "generation" else "image_edit"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    created = int(time.time())
    shape = {"background": "opaque", "output_format": "png", "quality": "medium", "size": f"{size[0]}x{size[1]}"}
    for index in range(n):
        for p in range(min(partials, 3)):
            image = base64.b64encode(png(max(16, size[0] // 8), max(16, size[1] // 8), index * 7 + p)).decode()
            event = {"type": f"{prefix}.partial_image", "b64_json": image, "created_at": created,
                     "partial_image_index": p, **shape}
            await stream_part(send, sse(event, f"{prefix}.partial_image"), req.step)
    for index in range(n):
        image = base64.b64encode(png(size[0], size[1], zlib.crc32(prompt.encode()) + index)).decode()
        done = {"type": f"{prefix}.completed", "b64_json": image, "created_at": created, **shape,
                "usage": _image_usage(prompt, 1, *size, images_in)}
        await stream_part(send, sse(done, f"{prefix}.completed"), req.step)
    await end_stream(send)


def _form(req: MockRequest) -> tuple[dict[str, bytes], dict[str, str]] | None:
    try:
        return parse_form(req.headers.get("content-type", ""), req.body)
    except FormError:
        return None


async def generations(req: MockRequest, send: Send) -> None:
    doc = req.json()
    if not isinstance(doc, dict):
        await respond_json(send, 400, invalid("The body must be a JSON object.", None))
        return
    await _images(req, send, doc, "generation", 0)


async def _image_form(req: MockRequest, send: Send, kind: str) -> None:
    form = _form(req)
    if form is None:
        await respond_json(send, 400, invalid("The body must be multipart/form-data.", None))
        return
    parts, filenames = form
    images = [name for name in filenames if name in ("image", "image[]")]
    if not images:
        await respond_json(send, 400, invalid("Missing required parameter: 'image'.", "image",
                                              "missing_required_parameter"))
        return
    fields = {name: value.decode("utf-8", "replace") for name, value in parts.items() if name not in filenames}
    # the form reader keeps one part a name: count the image parts (``image[]`` repeats) in the body itself
    count = sum(req.body.count(f'name="{name}"; filename='.encode()) for name in images)
    await _images(req, send, fields, kind, max(1, count))


async def edits(req: MockRequest, send: Send) -> None:
    await _image_form(req, send, "edit")


async def variations(req: MockRequest, send: Send) -> None:
    await _image_form(req, send, "variation")


def audio_seconds(data: bytes) -> float:
    """A WAV file's length from its header; otherwise 16 kB a second."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE" and len(data) >= 44:
        byte_rate = int.from_bytes(data[28:32], "little")
        if byte_rate:
            return round((len(data) - 44) / byte_rate, 3)
    return round(len(data) / 16_000, 3)


def _timestamp(seconds: float, comma: bool) -> str:
    ms = int(round(seconds * 1000))
    text = f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"
    return text.replace(".", ",") if comma else text


async def _transcribe(req: MockRequest, send: Send, task: str) -> None:
    form = _form(req)
    if form is None:
        await respond_json(send, 400, invalid("The body must be multipart/form-data.", None))
        return
    parts, filenames = form
    if "file" not in filenames:
        await respond_json(send, 400, invalid("Missing required parameter: 'file'.", "file",
                                              "missing_required_parameter"))
        return
    fields = {name: value.decode("utf-8", "replace") for name, value in parts.items() if name not in filenames}
    model = fields.get("model")
    if not model:
        await respond_json(send, 400, invalid("Missing required parameter: 'model'.", "model",
                                              "missing_required_parameter"))
        return
    seconds = audio_seconds(parts["file"])
    text = req.step.reply or DEFAULT_TRANSCRIPT
    whisper = model.startswith("whisper")
    if whisper:
        usage: dict[str, Any] = {"type": "duration", "seconds": max(1, round(seconds))}
    else:
        audio = max(1, int(seconds * 10))
        out = count_tokens(text)
        usage = {"type": "tokens", "input_tokens": audio, "input_token_details": {"audio_tokens": audio,
                 "text_tokens": 0}, "output_tokens": out, "total_tokens": audio + out}
    fmt = fields.get("response_format") or "json"
    if fields.get("stream", "").lower() == "true":
        if whisper or task == "translate":
            await respond_json(send, 400, invalid(f"Streaming is not supported for model {model}.", "stream"))
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        for i, word in enumerate(text.split(" ")):
            delta = word if i == 0 else " " + word
            await stream_part(send, sse({"type": "transcript.text.delta", "delta": delta}), req.step)
        await end_stream(send, sse({"type": "transcript.text.done", "text": text, "usage": usage}))
        return
    if fmt == "json":
        await respond_json(send, 200, {"text": text, "usage": usage})
    elif fmt == "verbose_json":
        await respond_json(send, 200, {"task": task, "language": "english" if task == "translate" else
                                       fields.get("language") or "english", "duration": seconds, "text": text,
                                       "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": seconds, "text": text,
                                                     "tokens": [], "temperature": 0.0, "avg_logprob": -0.2,
                                                     "compression_ratio": 1.2, "no_speech_prob": 0.01}],
                                       "usage": usage})
    elif fmt in ("srt", "vtt"):
        start, end = _timestamp(0, fmt == "srt"), _timestamp(seconds, fmt == "srt")
        body = (f"1\n{start} --> {end}\n{text}\n\n" if fmt == "srt" else f"WEBVTT\n\n{start} --> {end}\n{text}\n\n")
        await respond(send, 200, body.encode(), b"text/plain; charset=utf-8")
    elif fmt == "text":
        await respond(send, 200, text.encode() + b"\n", b"text/plain; charset=utf-8")
    else:
        await respond_json(send, 400, invalid(f"Invalid 'response_format': {fmt!r}.", "response_format"))


async def transcriptions(req: MockRequest, send: Send) -> None:
    await _transcribe(req, send, "transcribe")


async def translations(req: MockRequest, send: Send) -> None:
    await _transcribe(req, send, "translate")


def speech_audio(fmt: str, seconds: float) -> bytes:
    """Audio of ``seconds`` in ``fmt`` (PCM/WAV silence with a faint tone; MP3 frames; other formats PCM bytes)."""
    samples = int(PCM_RATE * seconds)
    pcm = (struct.pack("<hh", 300, -300) * (samples // 2 + 1))[:samples * 2]
    if fmt == "wav":
        return (b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " +
                struct.pack("<IHHIIHH", 16, 1, 1, PCM_RATE, PCM_RATE * 2, 2, 16) + b"data" +
                struct.pack("<I", len(pcm)) + pcm)
    if fmt == "mp3":
        return MP3_FRAME * max(1, int(seconds / 0.026))
    return pcm


async def speech(req: MockRequest, send: Send) -> None:
    doc = req.json()
    text = doc.get("input") if isinstance(doc, dict) else None
    for name in ("model", "input", "voice"):
        if not isinstance(doc, dict) or not doc.get(name):
            await respond_json(send, 400, invalid(f"Missing required parameter: '{name}'.", name,
                                                  "missing_required_parameter"))
            return
    assert isinstance(text, str)
    if len(text) > 4096:
        await respond_json(send, 400, invalid("'input' is longer than 4096 characters.", "input"))
        return
    fmt = doc.get("response_format") or "mp3"
    if fmt not in _AUDIO_TYPES:
        await respond_json(send, 400, invalid(f"Invalid 'response_format': {fmt!r}.", "response_format"))
        return
    audio = speech_audio(fmt, max(1, len(text.split())) * SECONDS_A_WORD)
    pieces = max(1, req.step.chunks or 8)
    size = -(-len(audio) // pieces)
    if doc.get("stream_format") == "sse":
        if str(doc.get("model")).startswith("tts-1"):
            await respond_json(send, 400, invalid("stream_format 'sse' is not supported for this model.",
                                                  "stream_format"))
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        for at in range(0, len(audio), size):
            if at and _broke(req, at, len(audio)):
                await end_stream(send, sse({"type": "error", "error": {
                    "message": req.step.message or "mock error midway", "type": "server_error", "code": None}}))
                return
            event = {"type": "speech.audio.delta", "audio": base64.b64encode(audio[at:at + size]).decode()}
            await stream_part(send, sse(event), req.step)
        tokens_in = count_tokens(text)
        tokens_out = len(audio) // 1000
        await end_stream(send, sse({"type": "speech.audio.done", "usage": {
            "input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}}))
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", _AUDIO_TYPES[fmt])]})
    for at in range(0, len(audio), size):
        if at and _broke(req, at, len(audio)):
            raise ConnectionResetError("mock cuts the stream")
        await stream_part(send, audio[at:at + size], req.step)
    await end_stream(send)


def _broke(req: MockRequest, at: int, total: int) -> bool:
    """Whether speech stops here: halfway with ``stream_error`` ``middle`` (an SSE error event) or ``cut`` (the
    connection reset)."""
    if req.step.stream_error not in ("middle", "cut") or at < total // 2:
        return False
    if req.step.stream_error == "cut":
        raise ConnectionResetError("mock cuts the stream")
    return True


ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/images/generations$"), generations),
    ("POST", re.compile(r"^(?:/v1)?/images/edits$"), edits),
    ("POST", re.compile(r"^(?:/v1)?/images/variations$"), variations),
    ("POST", re.compile(r"^(?:/v1)?/audio/transcriptions$"), transcriptions),
    ("POST", re.compile(r"^(?:/v1)?/audio/translations$"), translations),
    ("POST", re.compile(r"^(?:/v1)?/audio/speech$"), speech),
]
