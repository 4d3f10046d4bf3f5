"""``/v1/prompts`` through the real gateway: templates and versions, render exactly as the spec says, and running a
template as a chat request (the completions route and a config's prompt_id), streamed and not."""

from __future__ import annotations

import asyncio
import tempfile

import msgspec
import pytest

from gateway.app import GatewayApp
from gateway.controlplane.mustache import MAX_RENDER_STEPS, MAX_RENDERED_CHARS, MAX_SECTION_DEPTH
from gateway.runtime import Runtime
from gateway.settings import load
from gateway.state.memory import MemoryStateStore
from tests.support.asgi import call
from tests.support.controlplane import api, create_key
from tests.support.http import post, stream_events
from tests.support.inprocess import start_in_process
from tests.support.servers import ADMIN_KEY

TEMPLATE = {
    "name": "greeter",
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You are {{persona}}."},
        {"role": "user", "content": "Hello {{name}}!{{#topics}} Ask me about {{.}}.{{/topics}}{{^topics}} "
                                    "Anything.{{/topics}}"},
    ],
    "hyperparameters": {"temperature": 0.2, "max_tokens": 50},
}
VARIABLES = {"persona": "a pirate", "name": "Ann", "topics": ["maps", "ships"]}


@pytest.fixture
def workspace(gateway, mock):
    """An admin key, a slug to the mock and a prompt using it, in a fresh workspace."""
    admin = create_key(gateway)
    base = mock.scenario()
    slug = {"slug": "llm", "provider": "vendorA", "api_key": "sk-prompt-slug", "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    resp = api(gateway, "POST", "/v1/prompts", {**TEMPLATE, "provider": "@llm"}, admin["key"])
    assert resp.status == 201, resp.text
    return admin, base, resp.json()


def run(server, key: str, prompt_id: str, body: dict, **headers: str):
    return post(f"{server.url}/v1/prompts/{prompt_id}/{'render' if headers.pop('render', '') else 'completions'}",
                body, {"x-gateway-api-key": key, "content-type": "application/json", **headers})


def render(server, key: str, prompt_id: str, body: dict):
    return run(server, key, prompt_id, body, render="1")


def test_create_answers_the_record_with_its_variables(workspace):
    _, _, prompt = workspace
    assert prompt["id"].startswith("pp-") and prompt["object"] == "prompt" and prompt["version"] == 1
    assert prompt["provider"] == "llm" and prompt["model"] == "gpt-4o-mini"
    assert prompt["messages"] == TEMPLATE["messages"]
    assert prompt["hyperparameters"] == {"temperature": 0.2, "max_tokens": 50}
    assert prompt["variables"] == ["persona", "name"]


def test_render_merges_request_hyperparameters_over_the_templates(gateway, workspace):
    admin, _, prompt = workspace
    resp = render(gateway, admin["key"], prompt["id"], {"variables": VARIABLES, "temperature": 0.9, "seed": 7})
    assert resp.status == 200, resp.text
    assert resp.json() == {"success": True, "data": {
        "messages": [
            {"role": "system", "content": "You are a pirate."},
            {"role": "user", "content": "Hello Ann! Ask me about maps. Ask me about ships."},
        ],
        "model": "gpt-4o-mini",
        "temperature": 0.9,
        "max_tokens": 50,
        "seed": 7,
    }}
    # an inverted section renders when its list is empty; other sections are optional
    resp = render(gateway, admin["key"], prompt["id"], {"variables": {"persona": "p", "name": "Bo"}})
    assert resp.json()["data"]["messages"][1]["content"] == "Hello Bo! Anything."


@pytest.mark.parametrize("body, param", [
    ({"variables": {"persona": "p"}}, "variables.name"),
    ({"variables": VARIABLES, "temperature": 3}, "temperature"),
    ({"variables": VARIABLES, "colour": "red"}, "colour"),
    ({"variables": VARIABLES, "stream_options": {"include_usage": True}}, "stream_options"),
    ({"variables": []}, "variables"),
])
def test_render_faults_are_400s_naming_the_field(gateway, workspace, body, param):
    admin, _, prompt = workspace
    resp = render(gateway, admin["key"], prompt["id"], body)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_updates_keep_every_version(gateway, workspace):
    admin, _, prompt = workspace
    path = f"/v1/prompts/{prompt['id']}"
    resp = api(gateway, "PUT", path, {"messages": [{"role": "user", "content": "Bye {{name}}"}]}, admin["key"])
    assert resp.status == 200, resp.text
    assert resp.json()["version"] == 2 and resp.json()["variables"] == ["name"]
    assert resp.json()["hyperparameters"] == TEMPLATE["hyperparameters"]  # what the update left out is kept
    versions = api(gateway, "GET", f"{path}/versions", key=admin["key"]).json()
    assert versions["total"] == 2 and [v["version"] for v in versions["data"]] == [1, 2]
    first = api(gateway, "GET", f"{path}/versions/1", key=admin["key"]).json()
    assert first["messages"] == TEMPLATE["messages"] and first["id"] == prompt["id"]
    assert api(gateway, "GET", f"{path}/versions/3", key=admin["key"]).status == 404
    assert api(gateway, "GET", f"{path}/versions/x", key=admin["key"]).status == 400
    data = render(gateway, admin["key"], prompt["id"], {"variables": {"name": "Cy"}}).json()["data"]
    assert data["messages"] == [{"role": "user", "content": "Bye Cy"}]
    assert api(gateway, "GET", path, key=admin["key"]).json()["version"] == 2
    assert api(gateway, "DELETE", path, key=admin["key"]).status == 200
    assert api(gateway, "GET", path, key=admin["key"]).status == 404
    assert api(gateway, "GET", f"{path}/versions/1", key=admin["key"]).status == 404
    assert render(gateway, admin["key"], prompt["id"], {"variables": {"name": "Cy"}}).status == 404


@pytest.mark.parametrize("change, param", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "{{#open}} never closed"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": "Hi {{name"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "{{/x}}"}]}]}, "messages[0].content[0].text"),
    ({"provider": "@absent"}, "provider"),
    ({"hyperparameters": {"temperature": 5}}, "hyperparameters.temperature"),
    ({"hyperparameters": {"wat": 1}}, "hyperparameters.wat"),
    ({"name": ""}, "name"),
    ({"model": ""}, "model"),
])
def test_invalid_templates_are_400s_naming_the_field(gateway, change, param):
    resp = api(gateway, "POST", "/v1/prompts", {**TEMPLATE, **change})
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_a_template_nested_past_the_limit_is_refused_at_create_and_update(gateway, workspace):
    admin, _, prompt = workspace
    deep = "{{#a}}" * 3000 + "x" + "{{/a}}" * 3000
    resp = api(gateway, "POST", "/v1/prompts", {**TEMPLATE, "messages": [{"role": "user", "content": deep}]})
    assert resp.status == 400 and resp.json()["error"]["param"] == "messages[0].content", resp.text
    assert f"deeper than {MAX_SECTION_DEPTH} (the limit)" in resp.json()["error"]["message"]
    over = MAX_SECTION_DEPTH + 1
    update = {"messages": [{"role": "user", "content": [{"type": "text", "text": "{{#a}}" * over + "{{/a}}" * over}]}]}
    resp = api(gateway, "PUT", f"/v1/prompts/{prompt['id']}", update, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "messages[0].content[0].text", resp.text


@pytest.mark.parametrize("route", ["render", "completions"])
def test_a_render_past_its_work_or_size_limit_is_a_400_naming_the_limit(gateway, mock, route):
    admin = create_key(gateway)
    base = mock.scenario()
    nested = {"role": "user", "content": "{{#a}}" * 5 + "{{.}}" + "{{/a}}" * 5}
    big = {"role": "user", "content": "{{#b}}{{text}}{{/b}}"}
    created = api(gateway, "POST", "/v1/prompts", {**TEMPLATE, "messages": [nested, big]}, admin["key"]).json()
    headers = {"x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1", "authorization": "Bearer sk-t"}
    fits = run(gateway, admin["key"], created["id"], {"variables": {"a": [1, 2], "b": [1], "text": "t"}},
               render=route == "render", **headers)
    assert fits.status == 200, fits.text
    for variables, limit in [({"a": list(range(25))}, f"{MAX_RENDER_STEPS} steps"),
                             ({"b": list(range(50)), "text": "z" * (MAX_RENDERED_CHARS // 40)},
                              f"{MAX_RENDERED_CHARS} characters")]:
        resp = run(gateway, admin["key"], created["id"], {"variables": variables}, render=route == "render", **headers)
        assert resp.status == 400, resp.text[:300]
        error = resp.json()["error"]
        assert error["param"] == "variables" and limit in error["message"] and "limit" in error["message"]
    assert mock.calls(base)["calls"] == (1 if route == "completions" else 0)


def test_completions_run_the_rendered_template_through_the_templates_slug(gateway, mock, workspace):
    admin, base, prompt = workspace
    resp = run(gateway, admin["key"], prompt["id"], {"variables": VARIABLES, "max_tokens": 20})
    assert resp.status == 200, resp.text
    assert resp.json()["object"] == "chat.completion"
    sent = mock.calls(base)["requests"][-1]
    assert sent["headers"]["authorization"] == "Bearer sk-prompt-slug"
    body = msgspec.json.decode(sent["body"])
    assert body["messages"][0] == {"role": "system", "content": "You are a pirate."}
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0.2 and body["max_tokens"] == 20


def test_completions_stream(gateway, mock, workspace):
    admin, _, prompt = workspace
    status, headers, events = stream_events(
        f"{gateway.url}/v1/prompts/{prompt['id']}/completions", {"variables": VARIABLES, "stream": True},
        {"x-gateway-api-key": admin["key"], "content-type": "application/json"})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    data = list(events)
    assert data[-1] == b"[DONE]"
    assert msgspec.json.decode(data[0])["object"] == "chat.completion.chunk"


def test_the_requests_own_provider_wins_over_the_templates(gateway, mock, workspace):
    admin, slug_base, prompt = workspace
    own = mock.scenario()
    resp = run(gateway, admin["key"], prompt["id"], {"variables": VARIABLES}, **{
        "x-gateway-provider": "vendorA", "x-gateway-custom-host": own + "/v1", "authorization": "Bearer sk-own"})
    assert resp.status == 200
    assert mock.calls(own)["requests"][-1]["headers"]["authorization"] == "Bearer sk-own"
    assert mock.calls(slug_base)["calls"] == 0


def test_a_configs_prompt_id_runs_the_template_on_chat_completions(gateway, mock, workspace):
    admin, base, prompt = workspace
    headers = {"x-gateway-api-key": admin["key"], "content-type": "application/json",
               "x-gateway-config": msgspec.json.encode({"prompt_id": prompt["id"]}).decode()}
    resp = post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES, "temperature": 1.5}, headers)
    assert resp.status == 200, resp.text
    body = msgspec.json.decode(mock.calls(base)["requests"][-1]["body"])
    assert body["messages"][1]["content"] == "Hello Ann! Ask me about maps. Ask me about ships."
    assert body["temperature"] == 1.5
    # with a provider of its own, the config routes the rendered request there
    own = mock.scenario()
    config = {"prompt_id": prompt["id"], "retry": {"attempts": 1}, "provider": "vendorA", "api_key": "sk-c",
              "custom_host": own + "/v1"}
    headers["x-gateway-config"] = msgspec.json.encode(config).decode()
    assert post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES}, headers).status == 200
    assert mock.calls(own)["calls"] == 1
    headers["x-gateway-config"] = '{"prompt_id": "pp-unknown"}'
    resp = post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES}, headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "prompt_id"
    headers["x-gateway-config"] = msgspec.json.encode({"strategy": {"mode": "single"}, "targets": [
        {"prompt_id": prompt["id"], "provider": "@llm"}]}).decode()
    resp = post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES}, headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "targets[0].prompt_id"


def test_member_keys_may_render_and_run_but_not_manage(gateway, workspace):
    admin, _, prompt = workspace
    member = create_key(gateway, "member", admin["workspace_id"])
    assert render(gateway, member["key"], prompt["id"], {"variables": VARIABLES}).status == 200
    assert run(gateway, member["key"], prompt["id"], {"variables": VARIABLES}).status == 200
    assert api(gateway, "GET", f"/v1/prompts/{prompt['id']}", key=member["key"]).status == 403
    assert api(gateway, "POST", "/v1/prompts", TEMPLATE, member["key"]).status == 403
    narrow = create_key(gateway, "member", admin["workspace_id"], scopes=["inference"])
    resp = render(gateway, narrow["key"], prompt["id"], {"variables": VARIABLES})
    assert resp.status == 403 and resp.json()["error"]["code"] == "missing_scope"


def test_a_configs_prompt_id_needs_the_prompts_run_scope_too(gateway, mock, workspace):
    admin, base, prompt = workspace
    narrow = create_key(gateway, "member", admin["workspace_id"], scopes=["inference"])
    config = msgspec.json.encode({"prompt_id": prompt["id"]}).decode()
    headers = {"x-gateway-api-key": narrow["key"], "content-type": "application/json", "x-gateway-config": config}
    resp = post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES}, headers)
    assert resp.status == 403, resp.text
    error = resp.json()["error"]
    assert error["code"] == "missing_scope" and "prompts.run" in error["message"]
    assert mock.calls(base)["calls"] == 0
    # the key may still run chat requests that render nothing
    plain = post(f"{gateway.url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                 {**headers, "x-gateway-config": '{"provider": "@llm"}'})
    assert plain.status == 200, plain.text
    member = create_key(gateway, "member", admin["workspace_id"])
    assert post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES},
                {**headers, "x-gateway-api-key": member["key"]}).status == 200


def test_a_configs_prompt_id_keeps_the_templates_slug_on_its_host(gateway, mock, workspace):
    admin, base, prompt = workspace
    outside = mock.scenario()
    config = {"prompt_id": prompt["id"], "custom_host": outside + "/v1"}
    headers = {"x-gateway-api-key": admin["key"], "content-type": "application/json",
               "x-gateway-config": msgspec.json.encode(config).decode()}
    resp = post(f"{gateway.url}/v1/chat/completions", {"variables": VARIABLES}, headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "custom_host", resp.text
    assert mock.calls(outside)["calls"] == 0 and mock.calls(base)["calls"] == 0


def test_prompts_are_workspace_scoped(gateway, workspace):
    _, _, prompt = workspace
    other = create_key(gateway)
    assert api(gateway, "GET", f"/v1/prompts/{prompt['id']}", key=other["key"]).status == 404
    assert render(gateway, other["key"], prompt["id"], {"variables": VARIABLES}).status == 404
    assert run(gateway, other["key"], prompt["id"], {"variables": VARIABLES}).status == 404
    assert api(gateway, "GET", "/v1/prompts", key=other["key"]).json()["total"] == 0


def test_prompts_survive_a_restart(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-prompts-")
    server = start_in_process(data_dir=data_dir)
    try:
        admin = create_key(server)
        prompt = api(server, "POST", "/v1/prompts", TEMPLATE, admin["key"]).json()
        api(server, "PUT", f"/v1/prompts/{prompt['id']}", {"name": "renamed"}, admin["key"])
    finally:
        server.stop()
    server = start_in_process(data_dir=data_dir)
    try:
        got = api(server, "GET", f"/v1/prompts/{prompt['id']}", key=admin["key"]).json()
        assert got["name"] == "renamed" and got["version"] == 2
        assert render(server, admin["key"], prompt["id"], {"variables": VARIABLES}).status == 200
    finally:
        server.stop()


def test_an_unclosed_tag_is_a_400_on_update_and_on_render_of_an_older_record(gateway, workspace, tmp_path):
    admin, _, prompt = workspace
    path = f"/v1/prompts/{prompt['id']}"
    resp = api(gateway, "PUT", path, {"messages": [{"role": "user", "content": "Bye {{name"}]}, admin["key"])
    assert resp.status == 400 and resp.json()["error"]["param"] == "messages[0].content", resp.text
    assert "'{{name' opened at character 4 is never closed" in resp.json()["error"]["message"]
    asyncio.run(_render_a_record_stored_before_the_check(tmp_path))


async def _render_a_record_stored_before_the_check(tmp_path) -> None:
    """A record written when an unclosed tag was kept as text: rendering it is the 400 a create would be."""
    settings = load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_DATA_DIR": str(tmp_path)})
    runtime = Runtime(settings, store=MemoryStateStore())
    app = GatewayApp(runtime)  # before the start: the app adds its routes' services to the runtime's lifecycle
    await runtime.start()
    try:
        key = {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"}
        created = (await call(app, "POST", "/v1/prompts", {**TEMPLATE, "provider": None}, key)).json()
        older = {**created, "messages": [{"role": "user", "content": "Hi {{name"}]}
        await runtime.store.record_put("prompt", created["id"], created["workspace_id"], msgspec.json.encode(older))
        resp = await call(app, "POST", f"/v1/prompts/{created['id']}/render", {"variables": VARIABLES}, key)
        assert resp.status == 400 and resp.json()["error"]["param"] == "messages[0].content", resp.body
    finally:
        await runtime.close()
