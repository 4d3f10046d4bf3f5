"""``/v1/responses/{id}`` and ``/input_items`` forwarded to the provider with the vendorA SDK: the spec's stored
response and input-item list shapes, paging and order; bad query values refused before anything is sent."""

from __future__ import annotations

import msgspec
import pytest
from openai import NotFoundError

from gateway.controlplane.keys import DEFAULT_SCOPES, SECRET_KIND, ApiKey, Principal, key_hash, new_secret
from tests.support.asgi import call, in_process
from tests.support.http import post, request
from tests.support.redis_servers import delete_prefix, random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY

RESPONSE_FIELDS = {"id", "object", "created_at", "metadata", "temperature", "top_p", "model", "instructions",
                   "tools", "tool_choice", "error", "incomplete_details", "output", "parallel_tool_calls", "user",
                   "previous_response_id", "reasoning", "max_output_tokens", "text", "truncation", "status", "usage"}


def stored_response(mock_url: str, base: str) -> str:
    """A response stored at the provider (made directly at the mock: the gateway only reads them)."""
    items = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    resp = post(f"{base}/v1/responses", {"model": "gpt-4o", "input": items, "instructions": "be brief",
                                         "metadata": {"ticket": "42"}}, {"authorization": "Bearer sk"})
    assert resp.status == 200, resp.text
    return resp.json()["id"]


def test_a_stored_response_is_retrieved_in_the_spec_shape(openai_client, mock):
    base = mock.scenario()
    response_id = stored_response(mock.url, base)
    client = openai_client(base + "/v1")
    response = client.responses.retrieve(response_id, include=["message.input_image.image_url",
                                                                "file_search_call.results"])
    raw = response.model_dump()
    assert RESPONSE_FIELDS <= set(raw)
    assert (raw["object"], raw["status"], raw["truncation"], raw["instructions"]) == (
        "response", "completed", "disabled", "be brief")
    assert raw["metadata"] == {"ticket": "42"} and raw["parallel_tool_calls"] is True
    assert response.output_text and raw["usage"]["total_tokens"] == (
        raw["usage"]["input_tokens"] + raw["usage"]["output_tokens"])
    assert "output_tokens_details" in raw["usage"] and "input_tokens_details" in raw["usage"]
    sent = mock.calls(base)["requests"][-1]
    assert sent["path"] == f"/v1/responses/{response_id}" and "include" in sent["query"]


def test_input_items_page_in_either_order(openai_client, mock):
    base = mock.scenario()
    response_id = stored_response(mock.url, base)
    client = openai_client(base + "/v1")
    first = client.responses.input_items.list(response_id, limit=2, order="asc")
    texts = [item.content[0].text for item in first.data]
    assert texts == ["message 0", "message 1"] and first.has_more
    assert (first.first_id, first.last_id) == (first.data[0].id, first.data[1].id)
    rest = client.responses.input_items.list(response_id, limit=10, order="asc", after=first.last_id)
    assert [item.content[0].text for item in rest.data] == ["message 2", "message 3", "message 4"]
    assert not rest.has_more
    newest = client.responses.input_items.list(response_id, order="desc", limit=1)
    assert newest.data[0].content[0].text == "message 4"
    every = [item.id for item in client.responses.input_items.list(response_id, limit=2, order="asc")]
    assert len(every) == 5  # the SDK followed the pages


def test_input_items_come_oldest_first_when_no_order_is_asked(openai_client, mock):
    # the spec's default order is asc, whatever the provider's own default is
    base = mock.scenario()
    response_id = stored_response(mock.url, base)
    page = openai_client(base + "/v1").responses.input_items.list(response_id, limit=2)
    assert [item.content[0].text for item in page.data] == ["message 0", "message 1"]
    assert mock.calls(base)["requests"][-1]["query"].endswith("order=asc")


@pytest.mark.parametrize("path, param", [
    ("/v1/responses/resp_x?include=everything", "include"),
    ("/v1/responses/resp_x?include[]=file_search_call.results&include[]=nope", "include"),
    ("/v1/responses/resp_x/input_items?limit=0", "limit"),
    ("/v1/responses/resp_x/input_items?limit=101", "limit"),
    ("/v1/responses/resp_x/input_items?order=sideways", "order"),
    ("/v1/responses/resp_x?stream=true", "stream"),
])
def test_bad_query_values_are_400s_naming_them_before_any_upstream_call(gateway, gw_headers, mock, path, param):
    base = mock.scenario()
    resp = request("GET", gateway.url + path, headers=gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param
    assert mock.calls(base)["calls"] == 0


def test_unknown_responses_are_404s_and_a_provider_is_needed(openai_client, mock, gateway):
    client = openai_client(mock.scenario() + "/v1")
    with pytest.raises(NotFoundError):
        client.responses.retrieve("resp_unknown")
    with pytest.raises(NotFoundError):
        client.responses.input_items.list("resp_unknown")
    resp = request("GET", f"{gateway.url}/v1/responses/resp_x", headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 400 and resp.json()["error"]["param"] == "x-gateway-provider"
    # anthropic keeps no responses: only the ones the gateway translated and stored exist, so an unknown id is a 404
    with pytest.raises(NotFoundError) as caught:
        openai_client(mock.url + "/v1", provider="anthropic").responses.retrieve("resp_x")
    assert "anthropic" in caught.value.message


# --- workspaces whose ids share a prefix: team and team:blue --------------------------------------------------


async def _legacy_key(app, workspace: str) -> str:
    """A member key of ``workspace`` written as a gateway made it before workspace ids were checked (``team:blue``
    is refused at creation now; keys made earlier keep working)."""
    keys = app.runtime.api_keys
    secret = new_secret()
    record = await keys.repo.create(ApiKey(name="legacy", role="member", scopes=list(DEFAULT_SCOPES["member"]),
                                           workspace_id=workspace, key_hash=key_hash(secret)))
    principal = Principal(record.id, workspace, record.organisation_id, "member", tuple(record.scopes))
    await keys.store.record_put(SECRET_KIND, record.key_hash, workspace, msgspec.json.encode(principal))
    return secret


@pytest.fixture(params=["embedded", "redis"])
async def shared_app(request, tmp_path):
    env = {}
    if request.param == "redis":
        env = {"GATEWAY_REDIS_URL": test_redis_url(), "GATEWAY_REDIS_KEY_PREFIX": random_prefix()}
    async with in_process(env, str(tmp_path)) as app:
        yield app
        if request.param == "redis":
            await delete_prefix(app.runtime.store._client, app.runtime.store.prefix)


async def test_a_workspace_never_reaches_a_stored_response_of_a_workspace_whose_id_extends_its_own(shared_app, mock):
    app = shared_app
    created = await call(app, "POST", "/v1/api-keys", {"name": "team", "workspace_id": "team"},
                         {"x-gateway-api-key": ADMIN_KEY})
    assert created.status == 201, created.text
    team = created.json()["key"]
    blue = await _legacy_key(app, "team:blue")
    bases = {team: mock.scenario(), blue: mock.scenario()}

    def headers(key: str) -> dict[str, str]:
        config = {"provider": "anthropic", "api_key": "sk-ant", "custom_host": bases[key] + "/v1"}
        return {"x-gateway-api-key": key, "x-gateway-config": msgspec.json.encode(config).decode(),
                "content-type": "application/json"}

    body = {"model": "claude-3-5-sonnet-20240620", "input": "a secret of team:blue"}
    stored = await call(app, "POST", "/v1/responses", body, headers(blue))
    assert stored.status == 200, stored.text
    response_id = stored.json()["id"]
    assert (await call(app, "GET", f"/v1/responses/{response_id}", b"", headers(blue))).status == 200

    crafted = f"blue:{response_id}"  # team's key + "blue:" + id was team:blue's storage key
    for method, path in (("GET", f"/v1/responses/{crafted}"), ("GET", f"/v1/responses/{crafted}/input_items"),
                         ("DELETE", f"/v1/responses/{crafted}")):
        answer = await call(app, method, path, b"", headers(team))
        assert answer.status == 404, (method, path, answer.text)
        assert "a secret" not in answer.text and "deleted" not in answer.text
    follow = await call(app, "POST", "/v1/responses", {**body, "input": "go on", "previous_response_id": crafted},
                        headers(team))
    assert follow.status == 404 and follow.json()["error"]["param"] == "previous_response_id", follow.text
    assert mock.calls(bases[team])["calls"] == 0  # nothing of team:blue's went anywhere on team's behalf
    # team:blue's response is still there, whole
    items = await call(app, "GET", f"/v1/responses/{response_id}/input_items", b"", headers(blue))
    assert items.status == 200 and "a secret of team:blue" in items.text
    # and team's own id space does not hold it either
    assert (await call(app, "GET", f"/v1/responses/{response_id}", b"", headers(team))).status == 404


@pytest.mark.parametrize("workspace", ["team:blue", "a/b", "-", "x" * 65, "tab\there", "{tag}", "ümlaut"])
async def test_a_key_in_a_workspace_id_outside_the_rule_is_a_400_naming_workspace_id(tmp_path, workspace):
    async with in_process(data_dir=str(tmp_path)) as app:
        answer = await call(app, "POST", "/v1/api-keys", {"name": "k", "workspace_id": workspace},
                            {"x-gateway-api-key": ADMIN_KEY})
        assert answer.status == 400, answer.text
        assert answer.json()["error"]["param"] == "workspace_id" and "workspace_id" in answer.json()["error"]["message"]
