"""Images and audio through the real gateway with the openai SDK, against the mock: generations, edits and
variations, transcriptions and translations (multipart, streamed on), speech (binary and SSE, relayed as it
arrives); providers that have them (cloudC's Imagen translated) and a 400 naming those that do not; fallback,
retries, a timeout, a breaker, a guardrail, a rate limit, the request log and metrics on these routes (the cache:
test_images_audio_cache.py); a large upload goes through disk, not memory."""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import time
import uuid
from pathlib import Path

import openai
import pytest

from tests.support.http import request
from tests.support.inprocess import start_in_process
from tests.support.policies import RATE, create
from tests.support.servers import ADMIN_KEY, start_gateway

PNG = b"\x89PNG\r\n\x1a\n"


def wav(seconds: float, rate: int = 16_000) -> bytes:
    pcm = bytes(int(rate * seconds) * 2)
    return (b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(pcm)) + pcm)


def logged(gateway, trace: str, timeout: float = 15.0, status: int | None = None) -> dict:
    """The newest log line of ``trace`` (with ``status`` when given)."""
    deadline = time.monotonic() + timeout
    while True:
        data = request("GET", f"{gateway.url}/v1/logs?trace_id={trace}",
                       headers={"x-gateway-api-key": ADMIN_KEY}).json()["data"]
        data = [line for line in data if status is None or line["status"] == status]
        if data:
            return data[0]
        assert time.monotonic() < deadline, f"no log line for {trace}"
        time.sleep(0.1)


def traced(openai_client, base: str | None = None, **headers: str):
    trace = f"media-{uuid.uuid4().hex}"
    return openai_client(base, **{"x-gateway-trace-id": trace, **headers}), trace


# --- images ------------------------------------------------------------------------------------------------------

def test_a_gpt_image_generation_comes_back_as_base64_with_usage_and_is_logged(gateway, openai_client):
    client, trace = traced(openai_client)
    result = client.images.generate(model="gpt-image-1", prompt="a lighthouse at dusk", size="256x256", n=2)
    assert len(result.data) == 2
    image = base64.b64decode(result.data[0].b64_json or "")
    assert image.startswith(PNG) and len(image) > 256 * 256
    assert result.usage is not None and result.usage.total_tokens > 0
    line = logged(gateway, trace)
    assert line["endpoint"] == "images.generations" and line["status"] == 200 and line["provider"] == "vendorA"
    assert line["usage_source"] == "reported" and line["total_tokens"] == result.usage.total_tokens


def test_a_dalle_generation_without_usage_counts_its_images(gateway, openai_client):
    client, trace = traced(openai_client)
    result = client.images.generate(model="dall-e-2", prompt="a cat", n=3)
    assert [d.url is not None for d in result.data] == [True, True, True]
    line = logged(gateway, trace)
    assert line["usage_source"] == "counted" and line["units"] == {"images": 3}


def test_a_large_base64_answer_is_relayed_byte_for_byte(gateway, mock):
    body = {"model": "gpt-image-1", "prompt": "big", "size": "1536x1024"}
    direct = request("POST", mock.url + "/v1/images/generations", body=body,
                     headers={"authorization": "Bearer sk-t", "content-type": "application/json"})
    relayed = request("POST", gateway.url + "/v1/images/generations", body=body, headers={
        "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": mock.url + "/v1",
        "authorization": "Bearer sk-t", "content-type": "application/json"})
    assert relayed.status == 200, relayed.text
    assert relayed.headers["content-type"].startswith("application/json")
    assert len(relayed.body) > 2_000_000
    assert json.loads(relayed.body)["data"] == json.loads(direct.body)["data"]


def test_image_edits_and_variations_send_the_files_on(openai_client, mock):
    base = mock.scenario()
    client = openai_client(base + "/v1")
    edited = client.images.edit(model="gpt-image-1", image=[("a.png", io.BytesIO(PNG + b"a" * 5000), "image/png"),
                                                            ("b.png", io.BytesIO(PNG + b"b" * 5000), "image/png")],
                                prompt="add a hat", size="64x64")
    assert base64.b64decode(edited.data[0].b64_json or "").startswith(PNG)
    assert edited.usage is not None and edited.usage.input_tokens_details.image_tokens == 2 * 65
    varied = client.images.create_variation(image=("c.png", io.BytesIO(PNG + b"c" * 100)), n=2,
                                            response_format="b64_json", size="256x256")
    assert len(varied.data) == 2
    sent = mock.calls(base)["requests"]
    assert [r["path"] for r in sent][-2:] == ["/v1/images/edits", "/v1/images/variations"]
    assert sent[-2]["body"].count("filename=") == 2 and "add a hat" in sent[-2]["body"]


def test_a_streamed_generation_relays_its_events(openai_client):
    client = openai_client()
    events = list(client.images.generate(model="gpt-image-1", prompt="stream it", size="64x64", stream=True,
                                         partial_images=2))
    assert [e.type for e in events] == ["image_generation.partial_image"] * 2 + ["image_generation.completed"]
    assert events[-1].usage.total_tokens > 0


def test_an_edit_without_an_image_or_prompt_is_a_400_naming_it(gateway):
    url = gateway.url + "/v1/images/edits"
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk-t",
               "content-type": "multipart/form-data; boundary=zz"}
    no_image = b'--zz\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nhat\r\n--zz--\r\n'
    resp = request("POST", url, body=no_image, headers=headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "image"
    no_prompt = (b'--zz\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\n' + PNG +
                 b"\r\n--zz--\r\n")
    resp = request("POST", url, body=no_prompt, headers=headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "prompt"
    json_body = request("POST", url, body={"prompt": "x"}, headers={**headers, "content-type": "application/json"})
    assert json_body.status == 400 and json_body.json()["error"]["param"] == "content-type"


@pytest.mark.parametrize(("path", "part", "fields"), [
    ("/v1/images/edits", "image", b'--zz\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nhat\r\n'),
    ("/v1/images/variations", "image", b""),
    ("/v1/audio/transcriptions", "file", b'--zz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'),
    ("/v1/audio/translations", "file", b'--zz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'),
])
@pytest.mark.parametrize("bad", ['filename="a\nb.png"', 'filename="a.png"\r\nContent-Type: image/png\rX-Injected: 1'],
                         ids=["lf-in-filename", "cr-in-content-type"])
def test_a_line_break_in_a_parts_headers_is_a_400_naming_the_field_and_nothing_is_sent(gateway, mock, path, part,
                                                                                          fields, bad):
    base = mock.scenario()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk-t",
               "x-gateway-custom-host": base + "/v1", "content-type": "multipart/form-data; boundary=zz"}
    file_part = (f'--zz\r\nContent-Disposition: form-data; name="{part}"; {bad}\r\n\r\n'.encode() + PNG +
                 b"\r\n--zz--\r\n")
    resp = request("POST", gateway.url + path, body=fields + file_part, headers=headers)
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == part and "CR, LF or NUL" in error["message"]
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize("provider", ["deepseek", "anthropic", "cohere"])
def test_a_provider_without_images_is_a_400_naming_it(openai_client, provider):
    client = openai_client(provider=provider)
    with pytest.raises(openai.BadRequestError) as info:
        client.images.generate(model="m", prompt="a cat")
    assert f"provider '{provider}'" in info.value.message and "images.generations" in info.value.message


def cloudC_client(gateway, base: str):
    from gateway_mock.cloudC import TEST_TOKEN

    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TEST_TOKEN, max_retries=0,
                         http_client=gateway.http_client(), default_headers={
        "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "cloudC", "x-gateway-custom-host": base + "/v1",
        "x-gateway-cloudC-project-id": "proj-1", "x-gateway-cloudC-region": "us-central1"})


def test_cloudC_imagen_models_are_translated_and_their_images_counted(gateway, mock):
    base = mock.scenario()
    client = cloudC_client(gateway, base)
    trace = f"media-{uuid.uuid4().hex}"
    result = client.images.generate(model="imagen-4.0-generate-001", prompt="a fox", n=2, size="1792x1024",
                                    response_format="b64_json", extra_headers={"x-gateway-trace-id": trace})
    assert [base64.b64decode(d.b64_json or "")[:8] for d in result.data] == [PNG, PNG]
    sent = json.loads(mock.calls(base)["requests"][0]["body"])
    assert sent == {"instances": [{"prompt": "a fox"}], "parameters": {"sampleCount": 2, "aspectRatio": "16:9"}}
    assert mock.calls(base)["requests"][0]["path"].endswith("/models/imagen-4.0-generate-001:predict")
    line = logged(gateway, trace)
    assert line["provider"] == "cloudC" and line["units"] == {"images": 2} and line["usage_source"] == "counted"


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"model": "gemini-2.0-flash"}, "model"),
    ({"model": "imagen-4.0-generate-001", "response_format": "url"}, "response_format"),
    ({"model": "imagen-4.0-generate-001", "size": "1000x300"}, "size"),
])
def test_what_imagen_cannot_do_is_a_400_naming_the_field_and_cloudC(gateway, mock, kwargs, param):
    base = mock.scenario()
    with pytest.raises(openai.BadRequestError) as info:
        cloudC_client(gateway, base).images.generate(prompt="a fox", **kwargs)
    assert info.value.body["param"] == param and "cloudC" in info.value.message  # type: ignore[index]
    assert mock.calls(base)["calls"] == 0


# --- audio -------------------------------------------------------------------------------------------------------

def test_a_transcription_in_each_response_format(gateway, openai_client):
    client, trace = traced(openai_client)
    audio = ("talk.wav", io.BytesIO(wav(3.0)), "audio/wav")
    result = client.audio.transcriptions.create(model="whisper-1", file=audio)
    assert result.text == "The quick brown fox jumps over the lazy dog."
    line = logged(gateway, trace)
    assert line["endpoint"] == "audio.transcriptions" and line["units"] == {"audio_seconds": 3}
    text = client.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(1.0)), response_format="text")
    assert text.strip() == "The quick brown fox jumps over the lazy dog."
    srt = client.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(1.0)), response_format="srt")
    assert "00:00:00,000 --> 00:00:01,000" in srt
    verbose = client.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(2.0)),
                                                 response_format="verbose_json")
    assert verbose.duration == 2.0 and verbose.segments


def test_a_streamed_transcription_and_a_translation(openai_client):
    client = openai_client()
    events = list(client.audio.transcriptions.create(model="gpt-4o-mini-transcribe", file=("t.wav", wav(1.0)),
                                                     stream=True))
    assert events[-1].type == "transcript.text.done"
    assert "".join(e.delta for e in events[:-1] if e.type == "transcript.text.delta") == events[-1].text
    translated = client.audio.translations.create(model="whisper-1", file=("fr.wav", wav(1.0)))
    assert translated.text


def test_speech_is_relayed_as_it_arrives_in_each_format(gateway, openai_client, mock):
    base = mock.scenario([{"chunks": 6, "chunk_delay_ms": 20}])
    client, trace = traced(openai_client, base + "/v1")
    with client.audio.speech.with_streaming_response.create(model="gpt-4o-mini-tts", voice="alloy",
                                                            input="one two three four five",
                                                            response_format="wav") as resp:
        assert resp.headers["content-type"] == "audio/wav"
        pieces = list(resp.iter_bytes())
    audio = b"".join(pieces)
    assert audio.startswith(b"RIFF") and len(audio) == 44 + 24_000 * 2 * 2  # five words, 0.4 s each
    line = logged(gateway, trace)
    assert line["endpoint"] == "audio.speech" and line["units"] == {"audio_seconds": 2.0}
    mp3 = client.audio.speech.create(model="tts-1", voice="alloy", input="hello there")
    assert mp3.content.startswith(b"\xff\xfb") and mp3.response.headers["content-type"] == "audio/mpeg"


def test_speech_as_sse_events_with_usage(gateway, openai_client):
    client, trace = traced(openai_client)
    with client.audio.speech.with_streaming_response.create(model="gpt-4o-mini-tts", voice="alloy", input="hi you",
                                                            response_format="pcm", stream_format="sse") as resp:
        assert resp.headers["content-type"] == "text/event-stream"
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line[6:]) for line in lines]
    assert events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert len(audio) == 24_000 * 2 * 0.8
    line = logged(gateway, trace)
    assert line["usage_source"] == "reported" and line["total_tokens"] == events[-1]["usage"]["total_tokens"]


def test_a_bad_speech_body_is_a_400_naming_the_field(openai_client):
    client = openai_client()
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="tts-1", voice="alloy", input="")
    assert info.value.body["param"] == "input"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="tts-1", voice="alloy", input="x", speed=9)
    assert info.value.body["param"] == "speed"  # type: ignore[index]


def test_groq_transcribes_and_a_chat_only_provider_is_a_400(openai_client, mock):
    groq = openai_client(provider="groq")
    assert groq.audio.transcriptions.create(model="whisper-large-v3", file=("t.wav", wav(1.0))).text
    with pytest.raises(openai.BadRequestError) as info:
        openai_client(provider="cerebras").audio.speech.create(model="m", voice="v", input="hi")
    assert "provider 'cerebras'" in info.value.message


def test_cloudB_deployments_serve_images_and_audio(openai_client, mock):
    base = mock.scenario()
    client = openai_client(base + "/openai", provider="cloudB", **{
        "x-gateway-cloudB-deployment-id": "dep-1", "x-gateway-cloudB-api-version": "2025-04-01-preview"})
    assert client.images.generate(model="gpt-image-1", prompt="x", size="64x64").data
    assert client.audio.transcriptions.create(model="whisper", file=("t.wav", wav(1.0))).text
    paths = [r["path"] for r in mock.calls(base)["requests"]]
    assert paths == ["/openai/deployments/dep-1/images/generations", "/openai/deployments/dep-1/audio/transcriptions"]
    with pytest.raises(openai.BadRequestError) as info:
        client.images.create_variation(image=("c.png", PNG))
    assert "provider 'cloudB'" in info.value.message


# --- gateway features --------------------------------------------------------------------------------------------

def test_a_transcription_falls_back_and_resends_the_file(gateway, openai_client, mock):
    failing = mock.scenario([{"status": 503}])
    good = mock.scenario()
    cfg = {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "sk-1", "custom_host": failing + "/v1"},
        {"provider": "vendorA", "api_key": "sk-2", "custom_host": good + "/v1"}]}
    client, trace = traced(openai_client, None, **{"x-gateway-config": json.dumps(cfg)})
    audio = wav(1.0)
    raw = client.audio.transcriptions.with_raw_response.create(model="whisper-1", file=("t.wav", audio))
    assert raw.headers["x-gateway-last-used-option-index"] == "config.targets[1]"
    assert raw.parse().text
    for base in (failing, good):
        sent = mock.calls(base)["requests"]
        assert len(sent) == 1 and "whisper-1" in sent[0]["body"] and 'filename="t.wav"' in sent[0]["body"]
    line = logged(gateway, trace)
    assert line["fallbacks"] == 1 and line["status"] == 200


def test_param_overrides_rewrite_the_form_fields_sent(openai_client, mock):
    base = mock.scenario()
    cfg = {"provider": "vendorA", "api_key": "sk-1", "custom_host": base + "/v1",
           "override_params": {"model": "gpt-4o-transcribe", "language": "fr"}}
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    assert client.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(0.5))).text
    sent = mock.calls(base)["requests"][0]["body"]
    assert 'name="model"\r\n\r\ngpt-4o-transcribe' in sent and 'name="language"\r\n\r\nfr' in sent
    assert "whisper-1" not in sent and 'filename="t.wav"' in sent


def test_speech_retries_a_429_then_answers(openai_client, mock):
    base = mock.scenario([{"status": 429, "times": 1}, {}])
    cfg = {"provider": "vendorA", "api_key": "sk-1", "custom_host": base + "/v1", "retry": {"attempts": 2}}
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    assert client.audio.speech.create(model="tts-1", voice="alloy", input="hi").content
    assert mock.calls(base)["calls"] == 2


def test_a_request_timeout_and_a_circuit_breaker_apply_to_speech(openai_client, mock):
    slow = mock.scenario([{"delay_ms": 3000}])
    cfg = {"provider": "vendorA", "api_key": "sk-1", "custom_host": slow + "/v1", "request_timeout": 300}
    with pytest.raises(openai.APIStatusError) as info:
        openai_client(None, **{"x-gateway-config": json.dumps(cfg)}).audio.speech.create(
            model="tts-1", voice="alloy", input="hi")
    assert info.value.status_code == 408
    failing, good = mock.scenario([{"status": 500}]), mock.scenario()
    cfg = {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "sk-1", "custom_host": failing + "/v1",
         "cb_config": {"failure_threshold": 1, "cooldown_interval": 30000}},
        {"provider": "vendorA", "api_key": "sk-2", "custom_host": good + "/v1"}]}
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    for _ in range(3):
        assert client.audio.speech.create(model="tts-1", voice="alloy", input="hi").content
    assert mock.calls(failing)["calls"] == 1 and mock.calls(good)["calls"] == 3


def test_an_input_guardrail_judges_an_image_prompt(gateway, openai_client, mock):
    base = mock.scenario()
    cfg = {"provider": "vendorA", "api_key": "sk-1", "custom_host": base + "/v1", "input_guardrails": [
        {"id": "no-weapons", "deny": True, "default.contains": {"words": ["sword"], "operator": "none"}}]}
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    with pytest.raises(openai.APIStatusError) as info:
        client.images.generate(model="gpt-image-1", prompt="a knight with a sword", size="64x64")
    assert info.value.status_code == 446
    assert info.value.response.json()["hook_results"]["before_request_hooks"][0]["id"] == "no-weapons"
    trace = f"media-{uuid.uuid4().hex}"
    assert client.images.generate(model="gpt-image-1", prompt="a knight with a flower", size="64x64",
                                  extra_headers={"x-gateway-trace-id": trace}).data
    assert mock.calls(base)["calls"] == 1
    hooks = logged(gateway, trace)["hook_results"]["before_request_hooks"]
    assert [(h["id"], h["verdict"]) for h in hooks] == [("no-weapons", True)]


def test_a_rate_limit_applies_to_speech_and_transcriptions(gateway, openai_client):
    run = uuid.uuid4().hex[:12]
    policy = create(gateway, RATE, {"name": f"rate {run}", "conditions": [{"key": "metadata.run", "value": run}],
                                    "group_by": [{"key": "metadata.run"}], "type": "requests", "unit": "rpd",
                                    "value": 2})
    try:
        client = openai_client(None, **{"x-gateway-metadata": json.dumps({"run": run})})
        client.audio.speech.create(model="tts-1", voice="alloy", input="hi")
        client.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(0.5)))
        with pytest.raises(openai.RateLimitError):
            client.audio.speech.create(model="tts-1", voice="alloy", input="hi")
    finally:
        request("DELETE", f"{gateway.url}{RATE}/{policy}", headers={"x-gateway-api-key": ADMIN_KEY})


def test_the_routes_are_counted_in_metrics(gateway, openai_client):
    client = openai_client()
    client.audio.translations.create(model="whisper-1", file=("t.wav", wav(0.5)))
    deadline = time.monotonic() + 15
    while True:
        text = request("GET", gateway.url + "/metrics", headers={"x-gateway-api-key": ADMIN_KEY}).text
        if 'endpoint="audio.translations"' in text:
            break
        assert time.monotonic() < deadline, "audio.translations never showed in /metrics"
        time.sleep(0.2)
    assert any(line.startswith("gateway_requests_total{") and 'endpoint="audio.translations"' in line
               for line in text.splitlines())


@pytest.fixture(scope="module")
def small_files_gateway(mock_server):
    server = start_in_process({"GATEWAY_FILE_MAX_BYTES": "65536"})
    yield server
    server.stop()


def test_an_audio_file_over_the_file_limit_is_a_413(small_files_gateway, mock):
    client = openai.OpenAI(base_url=f"{small_files_gateway.url}/v1", api_key="sk-t", max_retries=0,
                           http_client=small_files_gateway.http_client(),
                           default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                                            "x-gateway-custom-host": mock.url + "/v1"})
    with pytest.raises(openai.APIStatusError) as info:
        client.audio.transcriptions.create(model="whisper-1", file=("big.wav", wav(3.0)))
    assert info.value.status_code == 413
    assert client.audio.transcriptions.create(model="whisper-1", file=("ok.wav", wav(1.0))).text


@pytest.fixture(scope="module")
def fresh_gateway(mock_server):
    server = start_gateway()
    yield server
    server.stop()


def test_a_large_audio_upload_streams_through_disk_not_memory(fresh_gateway, mock):
    import http.client

    from tests.support.processes import peak_rss_kb

    size = 48 * 1024 * 1024
    before = peak_rss_kb(fresh_gateway.proc.pid)
    piece = bytes(65536)

    def body():
        yield b'--zz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
        yield b'--zz\r\nContent-Disposition: form-data; name="file"; filename="long.pcm"\r\n\r\n'
        for _ in range(size // len(piece)):
            yield piece
        yield b"\r\n--zz--\r\n"

    conn = http.client.HTTPConnection("127.0.0.1", fresh_gateway.port, timeout=120)
    try:
        conn.request("POST", "/v1/audio/transcriptions", body=body(), encode_chunked=True, headers={
            "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk-t",
            "x-gateway-custom-host": mock.url + "/v1", "content-type": "multipart/form-data; boundary=zz"})
        resp = conn.getresponse()
        answer = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, answer
    assert json.loads(answer)["usage"]["seconds"] == round(size / 16_000)
    grew_mb = (peak_rss_kb(fresh_gateway.proc.pid) - before) / 1024
    assert grew_mb < 24, f"peak memory grew by {grew_mb:.0f} MB while a 48 MB audio file went through"


def spooled_files_open(server, data_dir: str) -> int:
    """How many files under the gateway's spool directory its processes hold open (unnamed temporary files read
    as ``<dir>/#<inode> (deleted)``)."""
    from tests.support.processes import tree

    spool = str(Path(data_dir) / "tmp")
    count = 0
    for pid in tree(server.proc.pid):
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                count += os.readlink(fd).startswith(spool)
            except OSError:
                continue
    return count


def test_a_forms_spooled_files_are_closed_however_the_request_ends(mock_server, mock, tmp_path):
    """Answered, failed upstream, or refused before its form was read: the worker holds none of the files it
    spooled the forms to (six would stay open if the pipeline did not close them)."""
    server = start_gateway(data_dir=str(tmp_path))
    try:
        failing = mock.scenario([{"status": 500}] * 3)
        for base, status in ((mock.url, 200), (failing, 500)):
            client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="sk-t", max_retries=0, default_headers={
                "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1"})
            for _ in range(3):
                try:
                    client.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(12.0)))
                    got = 200
                except openai.APIStatusError as error:
                    got = error.status_code
                assert got == status
        bad = request("POST", f"{server.url}/v1/audio/transcriptions",
                      b'--zz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--zz\r\n'
                      b'Content-Disposition: form-data; name="file"; filename="t.wav"\r\n\r\n' + wav(12.0)
                      + b"\r\n--zz--\r\n",
                      {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "nosuchai", "authorization": "Bearer x",
                       "content-type": "multipart/form-data; boundary=zz"})
        assert bad.status == 400
        assert spooled_files_open(server, str(tmp_path)) == 0
    finally:
        server.stop()


ROUTE_CALLS = {
    "images.generations": lambda c: c.images.generate(model="gpt-image-1", prompt="a cat", size="64x64"),
    "images.edits": lambda c: c.images.edit(model="gpt-image-1", image=("a.png", PNG), prompt="hat", size="64x64"),
    "images.variations": lambda c: c.images.create_variation(image=("a.png", PNG), size="256x256"),
    "audio.transcriptions": lambda c: c.audio.transcriptions.create(model="whisper-1", file=("t.wav", wav(0.5))),
    "audio.translations": lambda c: c.audio.translations.create(model="whisper-1", file=("t.wav", wav(0.5))),
    "audio.speech": lambda c: c.audio.speech.create(model="tts-1", voice="alloy", input="hi"),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("endpoint", sorted(ROUTE_CALLS))
def test_each_route_falls_back_is_rate_limited_and_logged(gateway, openai_client, mock, endpoint):
    run = uuid.uuid4().hex[:12]
    policy = create(gateway, RATE, {"name": f"rate {run}", "conditions": [{"key": "metadata.run", "value": run}],
                                    "group_by": [{"key": "metadata.run"}], "type": "requests", "unit": "rpd",
                                    "value": 1})
    try:
        failing, good = mock.scenario([{"status": 500}]), mock.scenario()
        cfg = {"strategy": {"mode": "fallback"}, "targets": [
            {"provider": "vendorA", "api_key": "sk-1", "custom_host": failing + "/v1"},
            {"provider": "vendorA", "api_key": "sk-2", "custom_host": good + "/v1"}]}
        client, trace = traced(openai_client, None, **{"x-gateway-config": json.dumps(cfg),
                                                       "x-gateway-metadata": json.dumps({"run": run})})
        ROUTE_CALLS[endpoint](client)
        assert (mock.calls(failing)["calls"], mock.calls(good)["calls"]) == (1, 1)
        with pytest.raises(openai.RateLimitError):
            ROUTE_CALLS[endpoint](client)
        assert logged(gateway, trace, status=429)["endpoint"] == endpoint
        line = logged(gateway, trace, status=200)
        assert line["endpoint"] == endpoint and line["fallbacks"] == 1 and line["target"] == "config.targets[1]"
    finally:
        request("DELETE", f"{gateway.url}{RATE}/{policy}", headers={"x-gateway-api-key": ADMIN_KEY})
