"""The response cache on the images and audio routes, through the real gateway with the openai SDK against the mock:
a repeat is a HIT with the same bytes and content type and no upstream call (JSON images, a transcription of the
same file, binary speech, SSE speech and transcription streams, a streamed generation); another file, field or
prompt is a MISS; max_age, force refresh, namespaces, ``semantic`` acting as exact, errors and answers over the
entry bound never stored; on the embedded store and on Redis."""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest
from openai import OpenAI

from tests.api.test_images_audio import PNG, wav
from tests.support.http import request
from tests.support.inprocess import InProcessGateway, start_in_process
from tests.support.servers import ADMIN_KEY


@pytest.fixture(params=["embedded", "redis"])
def any_store(request):
    """The session gateway (embedded store), or a gateway on the test Redis."""
    if request.param == "embedded":
        yield request.getfixturevalue("gateway")
        return
    server = start_in_process(request.getfixturevalue("shared_redis"))
    try:
        assert _health(server.url)["state"]["backend"] == "redis"
        yield server
    finally:
        server.stop()


def _health(url: str) -> dict:
    return request("GET", url + "/health").json()


def cached_client(gateway, base: str, cache: dict | None = None, **headers: str) -> OpenAI:
    """An openai SDK client of ``gateway`` whose config sends to the mock scenario ``base`` and caches answers."""
    cfg = {"provider": "vendorA", "api_key": "sk-1", "custom_host": base + "/v1",
           "cache": cache or {"mode": "simple"}}
    in_process = gateway.http_client() if isinstance(gateway, InProcessGateway) else None
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-unused", max_retries=0, timeout=60, http_client=in_process,
                  default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": json.dumps(cfg), **headers})


def status(raw) -> str:
    return raw.headers["x-gateway-cache-status"]


def generate(client, prompt: str = "a lighthouse", **extra):
    return client.images.with_raw_response.generate(model="gpt-image-1", prompt=prompt, size="64x64", **extra)


def test_a_repeated_image_generation_is_a_hit_with_the_same_bytes(any_store, mock):
    base = mock.scenario()
    client = cached_client(any_store, base)
    first, second = generate(client), generate(client)
    assert (status(first), status(second)) == ("MISS", "HIT")
    assert second.content == first.content and second.parse().data
    assert second.headers["content-type"] == first.headers["content-type"]
    assert second.headers["x-gateway-provider"] == "vendorA"
    assert mock.calls(base)["calls"] == 1
    assert status(generate(client, "a windmill")) == "MISS"  # another prompt
    assert status(generate(client, n=2)) == "MISS"  # another field
    assert mock.calls(base)["calls"] == 3


def test_a_hit_is_logged_as_a_hit_that_spent_no_tokens(gateway, mock):
    base = mock.scenario()
    trace = f"media-{uuid.uuid4().hex}"
    client = cached_client(gateway, base, **{"x-gateway-trace-id": trace})
    generate(client, "logged")
    assert status(generate(client, "logged")) == "HIT"
    lines: list[dict] = []
    deadline = time.monotonic() + 15
    while len(lines) < 2:
        assert time.monotonic() < deadline, f"two log lines for {trace}"
        time.sleep(0.1)
        lines = request("GET", f"{gateway.url}/v1/logs?trace_id={trace}",
                        headers={"x-gateway-api-key": ADMIN_KEY}).json()["data"]
    hit = next(line for line in lines if line["cache_status"] == "HIT")
    assert hit["status"] == 200 and hit["usage_source"] == "none" and hit["endpoint"] == "images.generations"
    assert hit["provider"] == "vendorA"


def transcribe(client, audio: bytes, name: str = "t.wav", **extra):
    return client.audio.transcriptions.with_raw_response.create(model="whisper-1", file=(name, audio, "audio/wav"),
                                                                **extra)


def test_a_transcription_of_the_same_file_is_a_hit_and_another_file_or_field_a_miss(any_store, mock):
    base = mock.scenario()
    client = cached_client(any_store, base)
    audio = wav(1.0)
    first, second = transcribe(client, audio), transcribe(client, audio)
    assert (status(first), status(second)) == ("MISS", "HIT")
    assert second.content == first.content and second.parse().text
    other = bytearray(audio)
    other[-1] = 1  # the same size and name, one byte different
    assert status(transcribe(client, bytes(other))) == "MISS"
    assert status(transcribe(client, audio, language="fr")) == "MISS"
    assert status(transcribe(client, audio, name="u.wav")) == "MISS"
    assert status(transcribe(client, audio, response_format="text")) == "MISS"
    assert mock.calls(base)["calls"] == 5
    assert status(transcribe(client, bytes(other))) == "HIT"


def test_speech_audio_is_a_hit_with_the_same_bytes_and_content_type(any_store, mock):
    base = mock.scenario()
    client = cached_client(any_store, base)

    def speak(voice: str = "alloy", **extra):
        return client.audio.speech.with_raw_response.create(model="gpt-4o-mini-tts", voice=voice,
                                                            input="one two three", **extra)

    first, second = speak(response_format="wav"), speak(response_format="wav")
    assert (status(first), status(second)) == ("MISS", "HIT")
    assert second.headers["content-type"] == "audio/wav" and second.content == first.content
    assert second.content.startswith(b"RIFF") and len(second.content) == 44 + 24_000 * 2 * 1.2
    assert status(speak(response_format="mp3")) == "MISS"
    assert status(speak(response_format="wav", voice="verse")) == "MISS"
    assert mock.calls(base)["calls"] == 3


def sse_lines(resp) -> list[str]:
    return [line for line in resp.iter_lines() if line]


def test_streamed_answers_are_stored_at_their_end_and_replayed_as_streams(gateway, mock):
    base = mock.scenario()
    client = cached_client(gateway, base)
    seen = []
    for _ in range(2):
        with client.audio.speech.with_streaming_response.create(
                model="gpt-4o-mini-tts", voice="alloy", input="hi you", response_format="pcm",
                stream_format="sse") as resp:
            assert resp.headers["content-type"] == "text/event-stream"
            seen.append((status(resp), sse_lines(resp)))
    assert [s for s, _ in seen] == ["MISS", "HIT"] and seen[0][1] == seen[1][1]
    assert json.loads(seen[1][1][-1][6:])["type"] == "speech.audio.done"
    # the same text not streamed is another answer (kept apart from the stream)
    plain = client.audio.speech.with_raw_response.create(model="gpt-4o-mini-tts", voice="alloy", input="hi you",
                                                         response_format="pcm")
    assert status(plain) == "MISS" and plain.headers["content-type"].startswith("audio/")
    audio = wav(1.0)
    texts = []
    for _ in range(2):
        events = list(client.audio.transcriptions.create(model="gpt-4o-mini-transcribe", file=("t.wav", audio),
                                                         stream=True))
        assert events[-1].type == "transcript.text.done"
        texts.append([e.type for e in events])
    assert texts[0] == texts[1]
    images = []
    for _ in range(2):
        events = list(client.images.generate(model="gpt-image-1", prompt="stream it", size="64x64", stream=True,
                                             partial_images=2))
        images.append([(e.type, e.b64_json) for e in events])
    assert images[0] == images[1] and images[1][-1][0] == "image_generation.completed"
    assert mock.calls(base)["calls"] == 4  # speech stream, plain speech, transcription stream, image stream


def test_max_age_and_force_refresh(any_store, mock):
    base = mock.scenario()
    short = cached_client(any_store, base, {"mode": "simple", "max_age": 1})
    assert [status(generate(short, "aged")) for _ in range(2)] == ["MISS", "HIT"]
    time.sleep(1.3)
    assert status(generate(short, "aged")) == "MISS"
    refresh = cached_client(any_store, base, {"mode": "simple", "max_age": 1},
                            **{"x-gateway-cache-force-refresh": "true"})
    assert status(generate(refresh, "aged")) == "REFRESH"
    assert status(generate(short, "aged")) == "HIT"  # the refreshed answer was stored
    never = cached_client(any_store, base, {"mode": "simple", "max_age": 0})
    assert [status(generate(never, "never")) for _ in range(2)] == ["MISS", "MISS"]
    assert mock.calls(base)["calls"] == 5


def test_a_namespace_partitions_the_cache(gateway, mock):
    base = mock.scenario()
    one = cached_client(gateway, base, **{"x-gateway-cache-namespace": f"ns-{uuid.uuid4().hex}"})
    two = cached_client(gateway, base, **{"x-gateway-cache-namespace": f"ns-{uuid.uuid4().hex}"})
    assert [status(transcribe(one, wav(0.5))) for _ in range(2)] == ["MISS", "HIT"]
    assert status(transcribe(two, wav(0.5))) == "MISS"
    assert mock.calls(base)["calls"] == 2


def test_semantic_mode_answers_exact_repeats_only(gateway, mock):
    base = mock.scenario()
    client = cached_client(gateway, base, {"mode": "semantic"})
    assert [status(generate(client, "a red fox in the snow")) for _ in range(2)] == ["MISS", "HIT"]
    assert status(generate(client, "a red fox in snow")) == "MISS"  # a near prompt is another image
    assert mock.calls(base)["calls"] == 2


def test_edits_key_on_each_image_file(gateway, mock):
    base = mock.scenario()
    client = cached_client(gateway, base)

    def edit(data: bytes):
        return client.images.with_raw_response.edit(model="gpt-image-1", image=("a.png", io.BytesIO(data), "image/png"),
                                                    prompt="add a hat", size="64x64")

    first, second = edit(PNG + b"a" * 5000), edit(PNG + b"a" * 5000)
    assert (status(first), status(second)) == ("MISS", "HIT") and first.content == second.content
    assert status(edit(PNG + b"b" * 5000)) == "MISS"
    assert mock.calls(base)["calls"] == 2


def test_errors_and_answers_over_the_bound_are_never_stored(gateway, mock):
    base = mock.scenario([{"status": 500, "times": 1}, {}])
    client = cached_client(gateway, base)
    with pytest.raises(Exception) as info:
        generate(client, "flaky")
    assert getattr(info.value, "status_code", None) == 500
    assert [status(generate(client, "flaky")) for _ in range(2)] == ["MISS", "HIT"]
    big = mock.scenario()
    large = cached_client(gateway, big)
    kept = [large.images.with_raw_response.generate(model="gpt-image-1", prompt="big", size="1536x1024")
            for _ in range(2)]
    assert [status(raw) for raw in kept] == ["MISS", "HIT"]
    assert len(kept[1].content) > 2_000_000 and kept[1].content == kept[0].content  # under the bound: stored
    sizes = []
    for _ in range(2):
        raw = large.images.with_raw_response.generate(model="gpt-image-1", prompt="big", size="1536x1024", n=2)
        sizes.append((status(raw), len(raw.content)))
    assert sizes[0][1] > 4 * 1024 * 1024, "the mock's answer should be over the cache's 4 MiB entry bound"
    assert [s for s, _ in sizes] == ["MISS", "MISS"]
    assert mock.calls(big)["calls"] == 3


def test_speech_that_breaks_off_or_ends_with_an_error_event_is_not_stored(gateway, mock):
    for broken in ({"stream_error": "cut"}, {"stream_error": "middle"}):
        base = mock.scenario([broken, {}])
        client = cached_client(gateway, base)
        sse = {"stream_format": "sse"} if broken["stream_error"] == "middle" else {}
        statuses = []
        for _ in range(3):
            try:
                with client.audio.speech.with_streaming_response.create(
                        model="gpt-4o-mini-tts", voice="alloy", input="one two three four", response_format="pcm",
                        **sse) as resp:
                    statuses.append(status(resp))
                    body = b"".join(resp.iter_bytes())
            except Exception:  # noqa: BLE001 - a cut body is an error on the client's side
                statuses.append("broken")
                continue
            if len(statuses) == 1 and sse:
                assert b'"type":"error"' in body
        assert statuses[1:] == ["MISS", "HIT"], (broken, statuses)
        assert mock.calls(base)["calls"] == 2
