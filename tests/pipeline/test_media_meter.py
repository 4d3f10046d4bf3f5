"""The media meter reads usage, image counts and audio seconds off relayed bytes, whatever the chunking."""

from __future__ import annotations

import json

import pytest

from gateway.pipeline.media_meter import MediaMeter, last_usage


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def metered(endpoint: str, data: bytes, size: int, content_type: str = "application/json",
            audio_format: str | None = None):
    meter = MediaMeter(endpoint, content_type, audio_format)
    for piece in chunks(data, size):
        meter.feed(piece)
    return meter.result()


@pytest.mark.parametrize("size", [1, 7, 64, 10_000, 10**7])
def test_images_are_counted_across_any_chunking(size):
    doc = {"created": 1, "data": [{"b64_json": "QUJD" * 3000}, {"b64_json": "REVG" * 10}, {"url": "https://x"}]}
    assert metered("images.generations", json.dumps(doc).encode(), size) == ({"images": 3}, "counted")


@pytest.mark.parametrize("size", [3, 100, 10**7])
def test_the_reported_usage_after_megabytes_of_base64_is_read(size):
    usage = {"input_tokens": 5, "input_tokens_details": {"image_tokens": 0, "text_tokens": 5},
             "output_tokens": 1056, "total_tokens": 1061}
    body = json.dumps({"created": 1, "data": [{"b64_json": "A" * 200_000}], "usage": usage}).encode()
    assert metered("images.generations", body, size) == (usage, "reported")


def test_streamed_images_count_completed_events():
    events = b"".join(f'event: image_generation.{kind}\ndata: {{"type":"image_generation.{kind}","b64_json":"AA"}}\n\n'
                      .encode() for kind in ("partial_image", "completed", "completed"))
    assert metered("images.generations", events, 5, "text/event-stream") == ({"images": 2}, "counted")


def test_a_duration_usage_is_audio_seconds_and_verbose_json_gives_them_too():
    body = b'{"text":"hi","usage":{"type":"duration","seconds":4}}'
    assert metered("audio.transcriptions", body, 4) == ({"audio_seconds": 4}, "reported")
    verbose = b'{"task":"transcribe","language":"english","duration":2.5,"text":"hi","segments":[]}'
    assert metered("audio.transcriptions", verbose, 4) == ({"audio_seconds": 2.5}, "counted")
    assert metered("audio.transcriptions", b"hi\n", 4, "text/plain") == (None, "none")


def test_speech_seconds_from_pcm_and_wav_sizes():
    assert metered("audio.speech", bytes(96_000), 4096, "audio/pcm", "pcm") == ({"audio_seconds": 2.0}, "counted")
    header = b"RIFF" + bytes(4) + b"WAVEfmt " + bytes(12) + (48_000).to_bytes(4, "little") + bytes(12)
    assert metered("audio.speech", header + bytes(24_000), 1000, "audio/wav", "wav") == (
        {"audio_seconds": 0.5}, "counted")
    assert metered("audio.speech", b"\xff\xfb" * 100, 10, "audio/mpeg", "mp3") == (None, "none")


def test_last_usage_skips_a_cut_or_non_object_usage():
    assert last_usage(b'"usage": {"a": 1}, "x": {"usage": {"b": "}"}}') == {"b": "}"}
    assert last_usage(b'{"usage": {"a": 1}} "usage": {"b": 2') == {"a": 1}
    assert last_usage(b'"usage": null') is None
