"""The one set of credential forms, through the real gateway: ``x-gateway-api-key``, or without it
``Authorization: Bearer <gateway key>``, on every route, with the same messages; a bearer that served as the gateway
key never reaches a provider, and with ``x-gateway-api-key`` the bearer stays the provider's token."""

from __future__ import annotations

from gateway.controlplane.auth import MISSING, UNKNOWN
from tests.support.controlplane import CHAT, api, create_key
from tests.support.http import request
from tests.support.poll import wait_for
from tests.support.servers import ADMIN_KEY

#: a route of each kind: inference, data, logs, admin, console API, metrics
ROUTES = [("POST", "/v1/chat/completions", CHAT), ("GET", "/v1/files", None), ("GET", "/v1/logs", None),
          ("GET", "/v1/providers", None), ("POST", "/v1/configs/validate", {"retry": {"attempts": 1}}),
          ("GET", "/metrics", None)]


def send(gateway, method: str, path: str, body, headers: dict[str, str]):
    return request(method, f"{gateway.url}{path}", body, {"content-type": "application/json", **headers})


def test_the_bearer_is_the_gateway_key_on_every_route_when_x_gateway_api_key_is_absent(gateway):
    for method, path, body in ROUTES:
        as_header = send(gateway, method, path, body, {"x-gateway-api-key": ADMIN_KEY})
        as_bearer = send(gateway, method, path, body, {"authorization": f"Bearer {ADMIN_KEY}"})
        # the chat names no provider: past authentication, a 400 for both forms alike
        assert as_header.status == as_bearer.status and as_bearer.status in (200, 400), (path, as_bearer.text)
        if as_bearer.status == 400:
            assert as_bearer.json()["error"]["param"] != "x-gateway-api-key", (path, as_bearer.text)


def test_every_route_answers_a_missing_or_unknown_key_with_the_same_401(gateway):
    for method, path, body in ROUTES:
        for headers, message in (({}, MISSING), ({"x-gateway-api-key": "gw-nosuch"}, UNKNOWN),
                                 ({"authorization": "Bearer gw-nosuch"}, UNKNOWN)):
            resp = send(gateway, method, path, body, headers)
            assert resp.status == 401, (path, headers, resp.text)
            assert resp.json()["error"] == {"message": message, "type": "authentication_error",
                                            "param": "x-gateway-api-key", "code": "invalid_api_key"}, path


def test_a_bearer_gateway_key_is_never_sent_upstream_and_a_slug_gives_the_credential(gateway, mock):
    admin = create_key(gateway, "admin")
    base = mock.scenario()
    slug = {"slug": "team", "provider": "vendorA", "api_key": "sk-slug-key", "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    resp = send(gateway, "POST", "/v1/chat/completions", CHAT,
                {"authorization": f"Bearer {admin['key']}", "x-gateway-provider": "@team"})
    assert resp.status == 200, resp.text
    sent = mock.calls(base)["requests"][0]["headers"]
    assert sent["authorization"] == "Bearer sk-slug-key" and admin["key"] not in str(sent)


def test_a_bearer_gateway_key_is_not_forwarded_even_when_a_forward_list_names_authorization(gateway, mock):
    admin = create_key(gateway, "admin")
    base = mock.scenario()
    # anthropic takes its key as x-api-key, so a forwarded authorization header would reach it as sent
    config = {"name": "fwd", "config": {"provider": "anthropic", "api_key": "sk-saved", "custom_host": base + "/v1",
                                        "forward_headers": ["authorization", "x-team"]}}
    saved = api(gateway, "POST", "/v1/configs", config, admin["key"])
    assert saved.status == 201, saved.text
    for extra in ({"x-gateway-config": saved.json()["id"]},
                  {"x-gateway-config": saved.json()["id"], "x-gateway-forward-headers": "authorization"}):
        resp = send(gateway, "POST", "/v1/chat/completions", CHAT,
                    {"authorization": f"Bearer {admin['key']}", "x-team": "blue", **extra})
        assert resp.status == 200, resp.text
    for sent in mock.calls(base)["requests"]:
        assert sent["headers"]["x-api-key"] == "sk-saved" and sent["headers"]["x-team"] == "blue"
        assert "authorization" not in sent["headers"] and admin["key"] not in str(sent)


def test_with_x_gateway_api_key_the_bearer_stays_the_providers_token(gateway, mock):
    admin = create_key(gateway, "admin")
    base = mock.scenario()
    resp = send(gateway, "POST", "/v1/chat/completions", CHAT,
                {"x-gateway-api-key": admin["key"], "authorization": "Bearer sk-provider-token",
                 "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1"})
    assert resp.status == 200, resp.text
    assert mock.calls(base)["requests"][0]["headers"]["authorization"] == "Bearer sk-provider-token"


def test_logs_read_with_a_bearer_gateway_key(gateway, mock):
    """The issue's case: ``Authorization: Bearer`` worked on /metrics and the admin routes but not on /v1/logs."""
    member = create_key(gateway, "member")
    base = mock.scenario()
    chat = send(gateway, "POST", "/v1/chat/completions", CHAT,
                {"x-gateway-api-key": member["key"], "authorization": "Bearer sk-test", "x-gateway-provider": "vendorA",
                 "x-gateway-custom-host": base + "/v1", "x-gateway-trace-id": "bearer-logs"})
    assert chat.status == 200, chat.text

    def logged():
        resp = send(gateway, "GET", "/v1/logs?trace_id=bearer-logs", None, {"authorization": f"Bearer {member['key']}"})
        assert resp.status == 200, resp.text
        return resp.json()["data"] or None

    items = wait_for(logged, timeout=10)
    assert items[0]["workspace"] == member["workspace_id"]
