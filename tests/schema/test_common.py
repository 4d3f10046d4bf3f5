"""Bodies the decoder front must refuse with a 400 (never a 500), through the real gateway."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.schema.common import BodyDecoder, not_utf8, validation_error
from tests.support.http import post

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("body", [
    b'{"model":"\xff\xfe","messages":[{"role":"user","content":"hi"}]}',
    b'{"model":"m","messages":[{"role":"user","content":"caf\xe9"}]}',
    b'{"model":"m","vendor_field":"\xc3\x28","messages":[{"role":"user","content":"hi"}]}',
])
@pytest.mark.parametrize("endpoint", ["chat/completions", "completions", "embeddings"])
def test_a_body_that_is_not_utf8_is_a_400_naming_the_body(gateway, mock, gw_headers, body, endpoint):
    if endpoint != "chat/completions":
        body = body.replace(b'"messages":[{"role":"user","content":', b'"prompt":').replace(b'"}]}', b'"}')
        if endpoint == "embeddings":
            body = body.replace(b'"prompt"', b'"input"')
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/{endpoint}", body, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert "not valid UTF-8" in resp.json()["error"]["message"] and "body" in resp.json()["error"]["message"]
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize("field", [
    b'"metadata": {"a": %s}', b'"vendor_field": %s',
    b'"tools": [{"type": "function", "function": {"name": "f", "parameters": {"a": %s}}}]'])
def test_a_body_nested_too_deeply_is_a_400_naming_the_body(gateway, mock, gw_headers, field):
    deep = b"[" * 5000 + b"1" + b"]" * 5000
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], ' + field.replace(b"%s", deep) + b"}"
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/chat/completions", body, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["message"] == "request body nests too deeply to decode"
    assert mock.calls(base)["calls"] == 0


def test_utf8_text_still_passes(gateway, mock, gw_headers):
    body = msgspec.json.encode({**CHAT, "messages": [{"role": "user", "content": "café ☕ 你好"}]})
    assert post(f"{gateway.url}/v1/chat/completions", body, gw_headers(mock.scenario() + "/v1")).status == 200


@pytest.mark.parametrize("seed", [2**63, -(2**63) - 1, 10**30])
@pytest.mark.parametrize("endpoint, body", [("chat/completions", CHAT),
                                            ("completions", {"model": "m", "prompt": "hi"})])
def test_seed_outside_signed_64_bits_is_a_400_naming_it(gateway, mock, gw_headers, seed, endpoint, body):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/{endpoint}", {**body, "seed": seed}, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == "seed"
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize("seed", [2**63 - 1, -(2**63), 0])
def test_seed_inside_the_range_is_forwarded(gateway, mock, gw_headers, seed):
    base = mock.scenario()
    assert post(f"{gateway.url}/v1/chat/completions", {**CHAT, "seed": seed}, gw_headers(base + "/v1")).status == 200
    assert msgspec.json.decode(mock.calls(base)["requests"][0]["body"])["seed"] == seed


@pytest.mark.parametrize("endpoint, body", [
    ("messages", b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"caf\xe9"}]}'),
    ("responses", b'{"model":"m","input":"caf\xe9"}'),
])
def test_a_door_body_that_is_not_utf8_is_a_400_naming_the_body(gateway, mock, gw_headers, endpoint, body):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/{endpoint}", body, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert "not valid UTF-8" in resp.json()["error"]["message"]
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize("error", [
    # msgspec before 0.23 raised the codec's own error for text that is not UTF-8; 0.23 and later a DecodeError
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    msgspec.DecodeError("Invalid UTF-8 encoded string"),
])
def test_both_msgspec_spellings_of_bad_utf8_give_the_documented_message(error):
    class _Raising:
        def decode(self, body: bytes) -> None:
            raise error

    decoder = BodyDecoder(dict)
    decoder._decoder = _Raising()  # type: ignore[assignment]
    with pytest.raises(InvalidRequest) as caught:
        decoder.decode(b'{"a": 1}')
    assert caught.value.message == not_utf8().message
    if isinstance(error, msgspec.DecodeError):
        assert validation_error(error).message == not_utf8().message


def test_other_decode_errors_still_say_not_valid_json():
    assert "not valid JSON" in validation_error(msgspec.DecodeError("Input data was truncated")).message


WORDS = "default.wordCount"


@pytest.mark.parametrize(("body", "config", "param", "message"), [
    ({**CHAT, "temperature": "hot"}, None, "temperature", "invalid temperature: must be a number, got a string"),
    ({**CHAT, "temperature": 5}, None, "temperature", "invalid temperature: must be a number <= 2.0"),
    ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, None, "stop", "invalid stop: must be an array of length <= 4"),
    (CHAT, {"retry": {"attempts": "x"}}, "retry.attempts",
     "invalid config: retry.attempts: must be an integer, got a string"),
    (CHAT, {"input_guardrails": [{WORDS: {"minWords": "x"}}]}, f"input_guardrails[0].{WORDS}.minWords",
     f"invalid config: input_guardrails[0].{WORDS}.minWords: must be an integer, got a string"),
    (CHAT, {"input_guardrails": [{WORDS: {"minWordz": 1}}]}, f"input_guardrails[0].{WORDS}.minWordz",
     f"invalid config: input_guardrails[0].{WORDS}.minWordz: unknown key"),
])
def test_a_field_at_fault_is_named_in_the_one_wording(gateway, mock, gw_headers, body, config, param, message):
    """docs/http-api.md, Errors: a body's fault reads ``invalid <path>: <what is wrong>``, a config's (and its
    guardrails' parameters') ``invalid config: <path>: <what is wrong>``, in the same words."""
    base = mock.scenario()
    headers = gw_headers(base + "/v1")
    if config is not None:
        headers = gw_headers(config={"provider": "vendorA", "api_key": "sk", "custom_host": base + "/v1", **config})
    resp = post(f"{gateway.url}/v1/chat/completions", msgspec.json.encode(body), headers)
    assert resp.status == 400, resp.text
    assert (resp.json()["error"]["param"], resp.json()["error"]["message"]) == (param, message)
    assert mock.calls(base)["calls"] == 0
