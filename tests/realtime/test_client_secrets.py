"""Client secrets through a served gateway: minted by a server with its gateway key and a provider slug, opened once
by a browser-like client with no headers, bound to the minting key (revocation, workspace) and the model."""

from __future__ import annotations

import json
import uuid

import pytest
import websockets

from tests.realtime.test_realtime_e2e import trace, ws_url
from tests.support.controlplane import api, create_key
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY
from tests.support.socket_events import raw_until


def slug_for(server, base: str, key: str = ADMIN_KEY, provider: str = "vendorA") -> str:
    slug = f"rt{uuid.uuid4().hex[:10]}"
    made = api(server, "POST", "/v1/providers", {"slug": slug, "provider": provider, "api_key": "sk-slug-key",
                                                 "custom_host": f"{base}/v1"}, key)
    assert made.status in (200, 201), made.text
    return slug


def mint(server, key: str = ADMIN_KEY, body: dict | None = None, **headers: str):
    return api(server, "POST", "/v1/realtime/client_secrets", body if body is not None else {}, key, **headers)


async def test_a_minted_secret_opens_one_session_as_the_minting_key(gw, mock):
    base = mock.scenario()
    admin = create_key(gw)
    member = create_key(gw, role="member", workspace=admin["workspace_id"])
    slug = slug_for(gw, base, admin["key"])
    minted = mint(gw, member["key"], {"expires_after": {"anchor": "created_at", "seconds": 60}},
                  **{"x-gateway-provider": f"@{slug}"})
    assert minted.status == 200, minted.text
    doc = minted.json()
    secret = doc["value"]
    assert secret.startswith("gwrt_") and doc["object"] == "realtime.client_secret" and doc["expires_at"] > 0
    trace_id = trace()
    url = f"{ws_url(gw.url)}/v1/realtime?model=gpt-realtime"
    # whatever else the page sends, the secret's grant decides the key and the provider
    async with websockets.connect(url, subprotocols=["realtime", f"openai-insecure-api-key.{secret}"],
                                  additional_headers={"x-gateway-trace-id": trace_id,
                                                      "x-gateway-provider": "vendorA",
                                                      "x-gateway-custom-host": "http://127.0.0.1:9/v1"}) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        await raw_until(ws, "response.done")
    upstream = mock.calls(base)["requests"][0]
    assert upstream["headers"]["authorization"] == "Bearer sk-slug-key"
    assert secret not in json.dumps(upstream["headers"])
    [item] = wait_logs(gw, trace_id, key=member["key"])
    assert item["status"] == 101 and item["workspace"] == member["workspace_id"]
    assert secret not in json.dumps(item) and member["key"] not in json.dumps(item)
    with pytest.raises(websockets.InvalidStatus) as again:  # once only
        async with websockets.connect(url, subprotocols=["realtime", f"openai-insecure-api-key.{secret}"]):
            pass
    assert again.value.response.status_code == 401
    assert "client secret" in json.loads(again.value.response.body)["error"]["message"]


async def test_a_secret_is_bound_to_its_model_and_dies_with_its_key(gw, mock):
    base = mock.scenario()
    admin = create_key(gw)
    member = create_key(gw, role="member", workspace=admin["workspace_id"])
    slug = slug_for(gw, base, admin["key"])
    headers = {"x-gateway-provider": f"@{slug}"}
    bound = mint(gw, member["key"], {"session": {"type": "realtime", "model": "gpt-realtime-mini"}}, **headers).json()
    assert bound["session"]["model"] == "gpt-realtime-mini"
    protocols = ["realtime", f"openai-insecure-api-key.{bound['value']}"]
    with pytest.raises(websockets.InvalidStatus) as other:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=gpt-realtime", subprotocols=protocols):
            pass
    assert other.value.response.status_code == 403
    assert json.loads(other.value.response.body)["error"]["param"] == "model"
    fresh = mint(gw, member["key"], {"session": {"model": "gpt-realtime-mini"}}, **headers).json()
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime",
                                  subprotocols=["realtime", f"openai-insecure-api-key.{fresh['value']}"]) as ws:
        assert json.loads(await ws.recv())["session"]["model"] == "gpt-realtime-mini"
    revoked = mint(gw, member["key"], **headers).json()
    assert api(gw, "DELETE", f"/v1/api-keys/{member['id']}", key=admin["key"]).status in (200, 204)
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m",
                                      subprotocols=["realtime", f"openai-insecure-api-key.{revoked['value']}"]):
            pass
    assert refused.value.response.status_code == 401


@pytest.mark.parametrize(("body", "headers", "param"), [
    ({}, {}, "x-gateway-provider"),
    ({}, {"x-gateway-provider": "vendorA", "authorization": "Bearer sk-x"}, "x-gateway-provider"),
    ({}, {"x-gateway-config": '{"provider": "vendorA", "api_key": "sk-x"}'}, "x-gateway-provider"),
    ({"expires_after": {"seconds": 5}}, None, "expires_after.seconds"),
    ({"session": {"model": "m", "instructions": "be brief"}}, None, "session"),
    ({"expires_after": {"anchor": "now"}}, None, "expires_after.anchor"),
])
def test_mint_refusals_name_the_field(gw, mock, body, headers, param):
    if headers is None:
        headers = {"x-gateway-provider": f"@{slug_for(gw, mock.scenario())}"}
    answer = mint(gw, ADMIN_KEY, body, **headers)
    assert answer.status == 400, answer.text
    assert answer.json()["error"]["param"] == param


def test_minting_needs_a_key_with_inference_and_a_realtime_provider(gw, mock):
    assert mint(gw, "gw-wrong", **{"x-gateway-provider": "@x"}).status == 401
    reader = create_key(gw, role="member", scopes=["logs.read"])
    assert mint(gw, reader["key"], **{"x-gateway-provider": "@x"}).status == 403
    slug = slug_for(gw, mock.scenario(), provider="anthropic")
    answer = mint(gw, ADMIN_KEY, **{"x-gateway-provider": f"@{slug}"})
    assert answer.status == 400 and answer.json()["error"]["param"] == "provider"
