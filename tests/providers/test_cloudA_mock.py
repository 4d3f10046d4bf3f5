"""The cloudA mock is as strict as the service: signature checks, Converse validation, real event-stream frames."""

from __future__ import annotations

import time

import msgspec
import pytest

from gateway.providers.cloudA import eventstream as es
from gateway.providers.cloudA import sigv4
from gateway_mock import cloudA as mock
from gateway_mock.kit import MockRequest, Step

KEY = "AKIDMOCKEXAMPLE"
SECRET = mock.CREDENTIALS[KEY][0]
SENT_PATH = "/model/anthropic.claude-v2%3A1/converse"
BODY = msgspec.json.encode({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})


def signed(body: bytes = BODY, key: str = KEY, secret: str = SECRET, token: str | None = None,
           when: str | None = None, service: str = "bedrock", **extra: str) -> MockRequest:
    headers = sigv4.sign("POST", "127.0.0.1:9797", SENT_PATH, body, sigv4.Credentials(key, secret, token),
                         "us-east-1", service, when=when, headers={"content-type": "application/json"})
    headers.update(extra)
    req = MockRequest("POST", "/model/anthropic.claude-v2:1/converse", "", headers, body, Step())
    req.raw_path = SENT_PATH.encode()
    return req


def failure(req: MockRequest) -> mock.AwsFailure:
    with pytest.raises(mock.AwsFailure) as info:
        mock.authenticate(req)
    return info.value


def test_a_correctly_signed_request_is_accepted():
    assert mock.authenticate(signed()) == KEY


def test_temporary_credentials_need_their_signed_session_token():
    key = "ASIAMOCKEXAMPLE"
    secret, token = mock.CREDENTIALS[key]
    assert mock.authenticate(signed(key=key, secret=secret, token=token)) == key
    assert failure(signed(key=key, secret=secret)).error_type == "UnrecognizedClientException"
    unsigned = signed(key=key, secret=secret)
    unsigned.headers["x-amz-security-token"] = token
    assert "must be a signed header" in failure(unsigned).message


@pytest.mark.parametrize(("req", "error_type", "text"), [
    (MockRequest("POST", "/", "", {}, b"", Step()), "MissingAuthenticationTokenException", "Missing"),
    (signed(secret="wrong"), "InvalidSignatureException", "signature we calculated"),
    (signed(key="AKIDNOBODY"), "UnrecognizedClientException", "security token"),
    (signed(service="s3"), "InvalidSignatureException", "bedrock"),
    (signed(when=sigv4.amz_date(time.time() - 20 * 60)), "InvalidSignatureException", "expired"),
    (signed(**{"x-amz-content-sha256": "0" * 64}), "InvalidSignatureException", "x-amz-content-sha256"),
])
def test_bad_requests_are_403s_in_aws_form(req, error_type, text):
    error = failure(req)
    assert error.status == 403 and error.error_type == error_type and text in error.message


def test_the_signed_path_must_be_the_encoded_one():
    req = signed()
    headers = sigv4.sign("POST", "127.0.0.1:9797", "/model/anthropic.claude-v2:1/converse", BODY,
                         sigv4.Credentials(KEY, SECRET), "us-east-1", "bedrock")
    req.headers = headers
    assert failure(req).error_type == "InvalidSignatureException"


@pytest.mark.parametrize(("doc", "text"), [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]}, "start with a user message"),
    ({"messages": [{"role": "user", "content": [{"text": "a"}]}, {"role": "user", "content": [{"text": "b"}]}]},
     "alternate"),
    ({"messages": [{"role": "user", "content": [{"text": "  "}]}]}, "blank"),
    ({"messages": [{"role": "user", "content": [{"text": "x"}]},
                   {"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "f", "input": {}}}]}]},
     "toolConfig"),
    ({"messages": [{"role": "user", "content": [{"text": "x"}]}], "inferenceConfig": {"temperature": 1.5}},
     "temperature"),
    ({"messages": [{"role": "user", "content": [{"text": "x"}]},
                   {"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "f", "input": {}}}]},
                   {"role": "user", "content": [{"toolResult": {"toolUseId": "b", "content": []}}]}],
      "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {}}}}]}}, "answers no toolUse"),
])
def test_converse_validation_rules(doc, text):
    with pytest.raises(mock.AwsFailure) as info:
        mock.validate(doc)
    assert info.value.status == 400 and info.value.error_type == "ValidationException" and text in info.value.message


async def run_handler(handler, req: MockRequest) -> tuple[int, dict, bytes]:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    await handler(req, send)
    start = sent[0]
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


async def test_the_stream_is_real_event_stream_frames():
    req = signed()
    req.step = Step(chunks=3)
    status, headers, body = await run_handler(mock.converse_stream, req)
    assert status == 200 and headers["content-type"] == "application/vnd.amazon.eventstream"
    messages = es.decode_all(body)
    assert [m.event_type for m in messages] == ["messageStart", "contentBlockDelta", "contentBlockDelta",
                                                "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"]
    assert all(m.message_type == "event" and m.content_type == "application/json" for m in messages)
    assert msgspec.json.decode(messages[-1].payload)["usage"]["totalTokens"] > 0


async def test_a_scripted_stream_exception_is_an_exception_frame():
    req = signed()
    req.step = Step(stream_error="first", error_type="ValidationException", message="bad input")
    _, _, body = await run_handler(mock.converse_stream, req)
    [message] = es.decode_all(body)
    assert (message.message_type, message.exception_type) == ("exception", "validationException")
    assert msgspec.json.decode(message.payload) == {"message": "bad input"}


async def test_errors_carry_the_aws_error_type_header():
    req = signed()
    req.step = Step(status=503)
    status, headers, body = await run_handler(mock.error, req)
    assert status == 503 and headers["x-amzn-errortype"].startswith("ServiceUnavailableException:")
    assert "message" in msgspec.json.decode(body)
    unsigned = MockRequest("POST", "/", "", {}, b"", Step(status=429))
    status, headers, _ = await run_handler(mock.error, unsigned)
    assert status == 403 and headers["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")
