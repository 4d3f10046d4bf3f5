"""The route table at the edge: trailing slashes, unknown routes and wrong methods."""

from __future__ import annotations

from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_a_trailing_slash_is_served_as_the_route_without_it(gateway, mock, gw_headers):
    base = mock.scenario()
    for path in ("/v1/chat/completions/", "/v1/chat/completions//"):
        resp = post(gateway.url + path, CHAT, gw_headers(base + "/v1"))
        assert resp.status == 200, resp.text
        assert resp.json()["object"] == "chat.completion"
    assert mock.calls(base)["calls"] == 2
    resp = request("GET", f"{gateway.url}/health/")
    assert resp.status == 200 and resp.json()["status"] == "ok"


def test_a_wrong_method_on_a_slashed_path_names_only_the_allowed_methods(gateway):
    resp = request("GET", f"{gateway.url}/v1/chat/completions/", headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 405
    assert resp.headers["allow"] == "POST"
    message = resp.json()["error"]["message"]
    assert message.startswith("GET is not allowed") and "allowed: POST" in message


def test_an_unknown_path_with_a_slash_is_404(gateway):
    resp = post(f"{gateway.url}/v1/chat/nothing/", CHAT, {"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 404
