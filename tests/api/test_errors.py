"""The one error format at the edge: auth, routes, methods, body size and encoding, provider identification."""

from __future__ import annotations

import gzip

import msgspec
import pytest

from tests.support.asgi import call, in_process
from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def assert_envelope(resp, status: int) -> dict:
    assert resp.status == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    error = resp.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_missing_or_unknown_gateway_key_is_401(gateway, mock, key):
    headers = {"x-gateway-provider": "vendorA", "x-gateway-custom-host": mock.url + "/v1",
               "authorization": "Bearer sk"}
    if key:
        headers["x-gateway-api-key"] = key
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", CHAT, headers), 401)
    assert error["param"] == "x-gateway-api-key"


def test_unknown_route_is_404_and_wrong_method_is_405(gateway):
    assert_envelope(request("GET", f"{gateway.url}/v1/nothing-here", headers={"x-gateway-api-key": ADMIN_KEY}), 404)
    resp = request("GET", f"{gateway.url}/v1/chat/completions", headers={"x-gateway-api-key": ADMIN_KEY})
    assert_envelope(resp, 405)
    assert resp.headers["allow"] == "POST"


async def test_body_over_the_limit_is_413(mock):
    async with in_process({"GATEWAY_MAX_BODY_BYTES": "1000"}) as app:
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                   "x-gateway-custom-host": mock.url + "/v1", "authorization": "Bearer sk"}
        body = {"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]}
        assert_envelope(await call(app, "POST", "/v1/chat/completions", body, headers), 413)
        assert (await call(app, "POST", "/v1/chat/completions", CHAT, headers)).status == 200


def test_no_provider_identification_is_400(gateway):
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", CHAT, {"x-gateway-api-key": ADMIN_KEY}), 400)
    assert "x-gateway-provider" in error["message"]


def test_unknown_provider_is_400_naming_it(gateway, gw_headers, mock):
    error = assert_envelope(
        post(f"{gateway.url}/v1/chat/completions", CHAT, gw_headers(mock.url + "/v1", provider="nosuchai")), 400)
    assert "nosuchai" in error["message"]


def test_unknown_slug_and_saved_config_are_400_naming_them(gateway):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "@my-openai"}
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", CHAT, headers), 400)
    assert "@my-openai" in error["message"]
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": "pc-saved-123"}
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", CHAT, headers), 400)
    assert "pc-saved-123" in error["message"]


def test_malformed_config_json_is_400(gateway):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": '{"provider": '}
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", CHAT, headers), 400)
    assert error["param"] == "config"


@pytest.mark.parametrize(
    "header, value",
    [
        ("x-gateway-metadata", "not json"),
        ("x-gateway-request-timeout", "soon"),
        ("x-gateway-cache-force-refresh", "maybe"),
    ],
)
def test_bad_gateway_header_values_are_400_naming_the_header(gateway, gw_headers, mock, header, value):
    error = assert_envelope(
        post(f"{gateway.url}/v1/chat/completions", CHAT, gw_headers(mock.url + "/v1", **{header: value})), 400)
    assert error["param"] == header


def test_config_completed_by_the_bearer_header(gateway, mock):
    base = mock.scenario()
    headers = {"x-gateway-api-key": ADMIN_KEY, "authorization": "Bearer sk-bearer",
               "x-gateway-config": '{"provider": "vendorA", "custom_host": "%s/v1"}' % base}
    assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers).status == 200
    assert mock.calls(base)["requests"][0]["headers"]["authorization"] == "Bearer sk-bearer"
    headers = {"x-gateway-api-key": ADMIN_KEY, "authorization": "Bearer sk-bearer",
               "x-gateway-custom-host": base + "/v1", "x-gateway-config": '{"provider": "vendorA"}'}
    assert post(f"{gateway.url}/v1/chat/completions", CHAT, headers).status == 200
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": '{"provider": "vendorA"}'}
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", CHAT, headers), 400)
    assert "api_key" in error["message"]


def test_a_gzipped_body_is_served_and_the_upstream_gets_json_and_an_unread_encoding_is_415(gateway, mock,
                                                                                        gw_headers):
    base = mock.scenario()
    body = msgspec.json.encode({**CHAT, "max_tokens": 7})
    resp = post(f"{gateway.url}/v1/chat/completions", gzip.compress(body),
                {**gw_headers(base + "/v1"), "content-encoding": "gzip"})
    assert resp.status == 200, resp.text
    (sent,) = mock.calls(base)["requests"]
    assert msgspec.json.decode(sent["body"])["max_tokens"] == 7
    assert "content-encoding" not in {name.lower() for name in sent["headers"]}
    error = assert_envelope(post(f"{gateway.url}/v1/chat/completions", body,
                                 {**gw_headers(base + "/v1"), "content-encoding": "br"}), 415)
    assert error["param"] == "content-encoding" and "'br'" in error["message"]
    assert mock.calls(base)["calls"] == 1
