"""Gateway headers that cannot be read answer 400 naming the header on every kind of route, through the real gateway:
JSON nested deeper than the decoder follows is a client's mistake, not a 500."""

from __future__ import annotations

import pytest

from tests.support.http import request
from tests.support.servers import ADMIN_KEY

DEEP_ARRAY = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000

ROUTES = [
    ("POST", "/v1/chat/completions", {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": "hi"}),
    ("POST", "/v1/messages", {"model": "claude-3-5-sonnet", "max_tokens": 5,
                              "messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/responses", {"model": "gpt-4o-mini", "input": "hi"}),
    ("GET", "/v1/models", None),
    ("GET", "/v1/logs", None),
    ("GET", "/v1/prompts", None),
    ("GET", "/v1/files", None),
]


@pytest.mark.parametrize(("name", "value"), [
    ("x-gateway-metadata", DEEP_OBJECT), ("x-gateway-metadata", DEEP_ARRAY),
    ("x-gateway-forward-headers", DEEP_ARRAY), ("x-gateway-sensitive-headers", DEEP_ARRAY)])
@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no-key"])
def test_deeply_nested_header_json_is_a_400_naming_the_header_on_every_route(gateway, mock, name, value, with_key):
    headers = {name: value, "content-type": "application/json"}
    if with_key:
        headers.update({"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                        "x-gateway-custom-host": f"{mock.url}/v1", "authorization": "Bearer sk-test"})
    for method, path, body in ROUTES:
        resp = request(method, gateway.url + path, body, headers)
        assert resp.status == 400, (path, resp.status, resp.text[:300])
        error = resp.json()["error"]
        assert name in error["message"], (path, error)
        if path != "/v1/messages":  # the anthropic door answers in anthropic's envelope, which has no param
            assert error["param"] == name, (path, error)
