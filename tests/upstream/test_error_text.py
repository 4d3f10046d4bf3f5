"""An upstream's error text through the real gateway: cut to a few KiB wherever it goes (the client's error, the log
line, ``/v1/logs``), and the credentials the gateway sent (a config's, a slug's, a saved config's, cloudA's, a
converted bearer) masked when the upstream echoes the request back; the pure pieces (the cut, the scrub, which
credentials a request carried) unit by unit. What PostgreSQL stores is read from its table."""

from __future__ import annotations

import asyncio
import re
import uuid

import asyncpg
import msgspec
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.http.errors import UpstreamError
from gateway.observability.masking import hash_value
from gateway.schema.config import Config
from gateway.upstream.error_text import (
    CUT_MARK,
    ERROR_TEXT_CHARS,
    bounded,
    scrub_text,
    scrubbed,
    sent_secrets,
)
from gateway.upstream.request import UpstreamRequest
from tests.support.controlplane import api, create_key
from tests.support.headers import headers_for
from tests.support.hostile import HostileUpstream, response
from tests.support.http import post, stream_events
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_logs
from tests.support.postgres import pg_url  # noqa: F401 - a fixture

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
CLOUDA_CHAT = {"model": "anthropic.claude-3-5-sonnet-20240620-v1:0", "messages": [{"role": "user", "content": "hi"}]}
#: the most of an error body or log item a cut message leaves (the message, its mark and the envelope)
SMALL = ERROR_TEXT_CHARS + 1024


# --- the pure pieces ----------------------------------------------------------------------------------------------

def test_a_long_text_is_cut_saying_where_and_how_much():
    assert bounded("short") == "short"
    cut = bounded("x" * 10_000)
    assert cut == "x" * ERROR_TEXT_CHARS + f"{CUT_MARK}{10_000 - ERROR_TEXT_CHARS} characters]"


def test_a_secret_is_masked_whole_and_the_visible_start_of_one_the_cut_split_is_dropped():
    secret = "sk-live-0123456789abcdefghij"
    assert scrub_text(f"key {secret} refused", [secret]) == f"key {hash_value(secret)} refused"
    split = bounded("y" * (ERROR_TEXT_CHARS - 10) + secret + "z" * 50)
    clean = scrub_text(split, [secret])
    assert secret[:10] not in clean and clean.startswith("y" * (ERROR_TEXT_CHARS - 10) + CUT_MARK)


def test_the_credentials_a_request_carried_come_from_its_headers_and_its_target():
    request = UpstreamRequest("https://example.com", {"authorization": "Bearer sk-header-0001",
                                                      "x-amz-security-token": "token-0002", "accept": "x/y"}, b"")
    target = Config(api_key="sk-config-0003", cloudA_access_key_id="AKIDEXAMPLE4",
                    cloudA_secret_access_key="secret-0005",
                    cloudC_service_account_json={"private_key": "-----BEGIN KEY-----6", "client_email": "a@b.c"})
    found = sent_secrets(request, target, "assertion-0007", None)
    assert set(found) == {"sk-header-0001", "token-0002", "sk-config-0003", "AKIDEXAMPLE4",
                          "secret-0005", "-----BEGIN KEY-----6", "assertion-0007"}
    assert found == sorted(found, key=len, reverse=True)  # a secret that holds another is replaced whole


def test_an_error_keeps_its_fields_but_not_the_secrets_in_them():
    error = UpstreamError("bad key sk-config-0003", param="sk-config-0003", code="invalid", status=401)
    scrubbed(error, ["sk-config-0003"])
    assert error.message == f"bad key {hash_value('sk-config-0003')}" and str(error) == error.message
    assert error.param == hash_value("sk-config-0003") and error.code == "invalid" and error.status == 401


# --- through the gateway ------------------------------------------------------------------------------------------

def _trace() -> str:
    return f"error-text-{uuid.uuid4().hex}"


def test_a_huge_upstream_error_message_reaches_client_and_logs_cut_to_a_few_kib(served_gateway):
    size = 5 * 1024 * 1024
    huge = response(500, b'{"error": {"message": "' + b"m" * size + b'", "type": "server_error"}}')
    trace = _trace()
    with HostileUpstream(lambda head, body: huge) as upstream:
        resp = post(f"{served_gateway.url}/v1/chat/completions", CHAT,
                    headers_for(upstream.url + "/v1", trace_id=trace))
    assert resp.status == 500 and len(resp.body) < SMALL
    message = resp.json()["error"]["message"]
    assert message.endswith(f"{CUT_MARK}{size - ERROR_TEXT_CHARS} characters]")
    item = wait_logs(served_gateway, trace)[0]
    assert len(msgspec.json.encode(item)) < 3 * SMALL and item["error"] == message
    lines = [line for line in served_gateway.output().splitlines() if trace in line]
    assert lines and all(len(line) < 3 * SMALL for line in lines)


def echo(status: int = 400, shape: str = "vendorA"):
    """An upstream that answers ``status`` with the request's head (its headers, verbatim) as the error message, in
    vendorA's error shape (also as ``code``), AWS's or anthropic's."""

    def answer(head: bytes, body: bytes) -> bytes:
        text = head.decode("latin-1")
        if shape == "aws":
            return response(status, msgspec.json.encode({"message": text}),
                            x_amzn_ErrorType="ValidationException")
        if shape == "anthropic":
            return response(status, msgspec.json.encode({"type": "error", "error": {
                "type": "invalid_request_error", "message": text}}))
        return response(status, msgspec.json.encode({"error": {"message": text, "type": "invalid_request_error",
                                                               "code": text}}))

    return answer


def _masked_everywhere(server, resp, trace: str, secrets: list[str], key: str | None = None) -> None:
    assert 400 <= resp.status < 500, resp.text
    assert "POST /" in resp.json()["error"]["message"]  # the upstream's echo of the request reached the client
    logged = msgspec.json.encode(wait_logs(server, trace, **({"key": key} if key else {}))).decode()
    for secret in secrets:
        assert secret not in resp.text, secret
        assert secret not in logged, secret
    assert hash_value(secrets[0]) in resp.text  # masked as logs mask a client's secrets, not dropped


def test_a_configs_api_key_and_a_converted_bearer_echoed_back_are_masked(gateway):
    config_key, bearer = "sk-config-echo-0123456789", "sk-bearer-echo-0123456789"
    with HostileUpstream(echo()) as upstream:
        trace = _trace()
        config = {"provider": "vendorA", "api_key": config_key, "custom_host": upstream.url + "/v1"}
        resp = post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(config=config, trace_id=trace))
        _masked_everywhere(gateway, resp, trace, [config_key])
        trace = _trace()
        resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                    headers_for(upstream.url + "/v1", token=bearer, trace_id=trace))
        _masked_everywhere(gateway, resp, trace, [bearer])


def test_a_slugs_key_never_reaches_a_member_who_may_not_read_the_slug(gateway):
    admin = create_key(gateway)
    member = create_key(gateway, "member", admin["workspace_id"], key=admin["key"])
    slug_key = "sk-slug-echo-0123456789abcdef"
    with HostileUpstream(echo()) as upstream:
        made = api(gateway, "POST", "/v1/providers", {"slug": "echoing", "provider": "vendorA", "api_key": slug_key,
                                                      "custom_host": upstream.url + "/v1"}, admin["key"])
        assert made.status == 201, made.text
        assert api(gateway, "GET", "/v1/providers/@echoing", key=member["key"]).status == 403
        trace = _trace()
        resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                    {"x-gateway-api-key": member["key"], "x-gateway-provider": "@echoing",
                     "x-gateway-trace-id": trace, "content-type": "application/json"})
        _masked_everywhere(gateway, resp, trace, [slug_key], key=member["key"])


def test_a_saved_configs_key_echoed_back_is_masked(gateway):
    admin = create_key(gateway)
    saved_key = "sk-saved-echo-0123456789abcdef"
    with HostileUpstream(echo()) as upstream:
        saved = api(gateway, "POST", "/v1/configs", {"name": "echoing", "config": {
            "provider": "vendorA", "api_key": saved_key, "custom_host": upstream.url + "/v1"}}, admin["key"])
        assert saved.status == 201, saved.text
        trace = _trace()
        resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                    {"x-gateway-api-key": admin["key"], "x-gateway-config": saved.json()["id"],
                     "x-gateway-trace-id": trace, "content-type": "application/json"})
        _masked_everywhere(gateway, resp, trace, [saved_key], key=admin["key"])


@pytest.mark.parametrize("stream", [False, True])
def test_cloudA_keys_echoed_back_are_masked(gateway, stream):
    key_id, secret, token = "AKIAECHOEXAMPLE0001", "echo/secret+access+key/0123456789", "FwoGZXIvYXdzEchoSession0123"
    with HostileUpstream(echo(shape="aws")) as upstream:
        trace = _trace()
        config = {"provider": "cloudA", "cloudA_access_key_id": key_id, "cloudA_secret_access_key": secret,
                  "cloudA_session_token": token, "cloudA_region": "us-east-1", "custom_host": upstream.url}
        resp = post(f"{gateway.url}/v1/chat/completions", {**CLOUDA_CHAT, "stream": stream},
                    headers_for(config=config, trace_id=trace))
        assert key_id in upstream.heads[0] and token in upstream.heads[0]  # the upstream saw (and echoed) them
        _masked_everywhere(gateway, resp, trace, [token, key_id, secret])


def test_an_in_band_stream_error_after_content_masks_the_key_echoed_in_it(gateway):
    """The error comes after the first content event (the status is out): it ends the stream as an SSE error event,
    which, like the log, shows the key only as its hash."""
    key = "sk-config-stream-echo-0123456789"
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]}

    def answer(head: bytes, body: bytes) -> bytes:
        error = {"error": {"message": head.decode("latin-1"), "type": "server_error"}}
        events = b"data: " + msgspec.json.encode(chunk) + b"\n\ndata: " + msgspec.json.encode(error) + b"\n\n"
        return response(200, events, content_type="text/event-stream")

    with HostileUpstream(answer) as upstream:
        trace = _trace()
        config = {"provider": "vendorA", "api_key": key, "custom_host": upstream.url + "/v1"}
        status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                          headers_for(config=config, trace_id=trace))
        received = b"".join(events).decode()
    assert status == 200 and '"content":"hi"' in received and "POST /" in received
    assert key not in received and hash_value(key) in received
    logged = msgspec.json.encode(wait_logs(gateway, trace)).decode()
    assert "POST /" in logged and key not in logged


def _service_account(token_uri: str) -> dict:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return {"type": "service_account", "project_id": "p", "private_key_id": "kid-echo", "private_key": pem,
            "client_email": "echo@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri}


@pytest.mark.parametrize("refused", [False, True])
def test_a_cloudC_token_the_gateway_minted_and_its_assertion_are_masked_when_echoed(gateway, refused):
    """The token endpoint mints a token, which the model endpoint echoes in its 400; or the token endpoint refuses,
    echoing the signed assertion the gateway posted."""
    minted = "ya29.minted-echo-token-0123456789"

    def answer(head: bytes, body: bytes) -> bytes:
        if head.startswith(b"POST /token"):
            if refused:
                return response(400, msgspec.json.encode({"error": "invalid_grant",
                                                          "error_description": body.decode()}))
            return response(200, msgspec.json.encode({"access_token": minted, "expires_in": 3600}))
        return response(400, msgspec.json.encode({"error": {"code": 400, "message": head.decode("latin-1"),
                                                            "status": "INVALID_ARGUMENT"}}))

    with HostileUpstream(answer) as upstream:
        trace = _trace()
        config = {"provider": "cloudC", "cloudC_service_account_json": _service_account(upstream.url + "/token"),
                  "cloudC_region": "us-central1", "cloudC_project_id": "p", "custom_host": upstream.url + "/v1"}
        resp = post(f"{gateway.url}/v1/chat/completions", {**CHAT, "model": "gemini-2.0-flash"},
                    headers_for(config=config, trace_id=trace))
        sent = upstream.heads[-1] if not refused else ""
    logged = msgspec.json.encode(wait_logs(gateway, trace)).decode()
    if refused:
        assert resp.status == 401 and "grant_type=" in resp.text, resp.text  # the echo of the form reached it
        assert re.search(r"assertion=sha256:[0-9a-f]{16}\)$", resp.json()["error"]["message"])
        assert "eyJ" not in resp.text and "eyJ" not in logged  # a JWT (its header starts eyJ) is nowhere
        return
    assert minted in sent and "POST /" in resp.json()["error"]["message"]
    assert minted not in resp.text and minted not in logged and hash_value(minted) in resp.text


def test_the_messages_door_masks_an_anthropic_key_echoed_back(gateway):
    key = "sk-ant-door-echo-0123456789"
    with HostileUpstream(echo(shape="anthropic")) as upstream:
        trace = _trace()
        config = {"provider": "anthropic", "api_key": key, "custom_host": upstream.url + "/v1"}
        resp = post(f"{gateway.url}/v1/messages", {"model": "claude-3-5-sonnet-20240620", "max_tokens": 16,
                                                   "messages": [{"role": "user", "content": "hi"}]},
                    headers_for(config=config, trace_id=trace))
        assert "x-api-key" in upstream.heads[0].lower() and key in upstream.heads[0]
    assert resp.json()["type"] == "error"  # the door's own error shape
    _masked_everywhere(gateway, resp, trace, [key])


def test_the_models_list_never_shows_a_member_the_slug_key_an_upstream_echoed(gateway):
    admin = create_key(gateway)
    member = create_key(gateway, "member", admin["workspace_id"], key=admin["key"])
    slug_key = "sk-slug-models-echo-0123456789"
    with HostileUpstream(echo()) as upstream:
        made = api(gateway, "POST", "/v1/providers", {"slug": "listing", "provider": "vendorA", "api_key": slug_key,
                                                      "custom_host": upstream.url + "/v1"}, admin["key"])
        assert made.status == 201, made.text
        listed = api(gateway, "GET", "/v1/models", key=member["key"])
    assert listed.status == 200, listed.text
    (failed,) = [e for e in listed.json()["errors"] if e["source"] == "@listing"]
    assert "GET /" in failed["message"] and slug_key not in listed.text and hash_value(slug_key) in listed.text


async def _stored_docs(url: str, trace: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT doc FROM gateway.request_logs WHERE trace_id = $1", trace)
    finally:
        await conn.close()
    return "".join(bytes(row["doc"]).decode("utf-8", "replace") for row in rows)


def test_postgresql_stores_the_cut_and_masked_error(pg_url):  # noqa: F811
    server = start_in_process({"GATEWAY_LOG_STORE_URL": pg_url})
    try:
        config_key = "sk-config-pg-echo-0123456789"
        huge = response(500, b'{"error": {"message": "' + b"p" * (3 * 1024 * 1024) + b'"}}')
        with HostileUpstream(echo()) as echoing, HostileUpstream(lambda head, body: huge) as erring:
            echo_trace, huge_trace = _trace(), _trace()
            config = {"provider": "vendorA", "api_key": config_key, "custom_host": echoing.url + "/v1"}
            assert post(f"{server.url}/v1/chat/completions", CHAT,
                        headers_for(config=config, trace_id=echo_trace)).status == 400
            assert post(f"{server.url}/v1/chat/completions", CHAT,
                        headers_for(erring.url + "/v1", trace_id=huge_trace)).status == 500
        wait_logs(server, echo_trace)
        wait_logs(server, huge_trace)
        echoed = asyncio.run(_stored_docs(pg_url, echo_trace))
        assert "POST /" in echoed and config_key not in echoed and hash_value(config_key) in echoed
        stored = asyncio.run(_stored_docs(pg_url, huge_trace))
        assert CUT_MARK in stored and len(stored) < 3 * SMALL
    finally:
        server.stop()
