"""Prompt templates from the client libraries people use (the openai SDK and langchain-openai) through the real
gateway: a config's ``prompt_id`` takes the ``model`` and ``messages`` every library sends; the template's
messages go first, then the client's, and the template's model is used."""

from __future__ import annotations

import msgspec
import pytest
from openai import OpenAI

from tests.api.test_prompts import TEMPLATE, VARIABLES, render
from tests.support.controlplane import api, create_key

TEMPLATE_SENT = [{"role": "system", "content": "You are a pirate."},
                 {"role": "user", "content": "Hello Ann! Ask me about maps. Ask me about ships."}]


@pytest.fixture
def workspace(gateway, mock):
    """An admin key, a slug to the mock and the greeter template using it, in a fresh workspace."""
    admin = create_key(gateway)
    base = mock.scenario()
    slug = {"slug": "llm", "provider": "vendorA", "api_key": "sk-prompt-slug", "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    resp = api(gateway, "POST", "/v1/prompts", {**TEMPLATE, "provider": "@llm"}, admin["key"])
    assert resp.status == 201, resp.text
    headers = {"x-gateway-api-key": admin["key"],
               "x-gateway-config": msgspec.json.encode({"prompt_id": resp.json()["id"]}).decode()}
    return admin, base, resp.json(), headers


def sent(mock, base: str) -> dict:
    return msgspec.json.decode(mock.calls(base)["requests"][-1]["body"])


def test_the_openai_sdk_runs_a_template_with_its_own_model_and_messages(gateway, mock, workspace):
    _, base, _, headers = workspace
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-unused", default_headers=headers, max_retries=0,
                    http_client=gateway.http_client())
    answer = client.chat.completions.create(model="gpt-client", messages=[{"role": "user", "content": "{{name}}?"}],
                                            temperature=0.7, extra_body={"variables": VARIABLES})
    assert answer.choices[0].message.content
    body = sent(mock, base)
    # the template's messages, then the client's exactly as sent (never rendered); the template's model
    assert body["messages"] == [*TEMPLATE_SENT, {"role": "user", "content": "{{name}}?"}]
    assert body["model"] == "gpt-4o-mini"
    assert body["temperature"] == 0.7 and body["max_tokens"] == 50  # the client's over the template's
    assert mock.calls(base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-prompt-slug"
    chunks = list(client.chat.completions.create(model="gpt-client", messages=[{"role": "user", "content": "hi"}],
                                                 stream=True, extra_body={"variables": VARIABLES}))
    assert chunks and chunks[0].object == "chat.completion.chunk"
    assert sent(mock, base)["messages"][-1] == {"role": "user", "content": "hi"}


def test_langchain_openai_runs_a_template(gateway, mock, workspace):
    from langchain_openai import ChatOpenAI

    _, base, _, headers = workspace
    llm = ChatOpenAI(base_url=f"{gateway.url}/v1", api_key="sk-unused", default_headers=headers, max_retries=0,
                     model="gpt-3.5-turbo", extra_body={"variables": VARIABLES}, http_client=gateway.http_client())
    reply = llm.invoke([("user", "Tell me about ships")])
    assert isinstance(reply.content, str) and reply.content
    body = sent(mock, base)
    assert body["messages"] == [*TEMPLATE_SENT, {"role": "user", "content": "Tell me about ships"}]
    assert body["model"] == "gpt-4o-mini"
    streamed = "".join(str(chunk.content) for chunk in llm.stream("and maps?"))
    assert streamed
    assert sent(mock, base)["messages"][-1] == {"role": "user", "content": "and maps?"}


def test_render_shows_how_a_clients_model_and_messages_combine(gateway, workspace):
    admin, _, prompt, _ = workspace
    resp = render(gateway, admin["key"], prompt["id"], {
        "variables": VARIABLES, "model": "gpt-client", "temperature": 0.9,
        "messages": [{"role": "assistant", "content": "Arr."}, {"role": "user", "content": "More"}]})
    assert resp.status == 200, resp.text
    assert resp.json()["data"] == {
        "messages": [*TEMPLATE_SENT, {"role": "assistant", "content": "Arr."}, {"role": "user", "content": "More"}],
        "model": "gpt-4o-mini", "temperature": 0.9, "max_tokens": 50}


@pytest.mark.parametrize(("body", "param"), [
    ({"variables": VARIABLES, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"variables": VARIABLES, "messages": [{"role": "user", "content": "x"}, 5]}, "messages[1]"),
    ({"variables": VARIABLES, "model": 5}, "model"),
])
def test_a_clients_bad_messages_or_model_are_400s_naming_them(gateway, workspace, body, param):
    admin, _, prompt, _ = workspace
    resp = render(gateway, admin["key"], prompt["id"], body)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_the_clients_bearer_fills_only_a_template_slug_without_a_key(gateway, mock, workspace):
    admin, base, prompt, headers = workspace
    keyless = mock.scenario()
    slug = {"slug": "keyless", "provider": "vendorA", "custom_host": keyless + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    other = api(gateway, "POST", "/v1/prompts", {**TEMPLATE, "provider": "@keyless"}, admin["key"]).json()
    config = msgspec.json.encode({"prompt_id": other["id"]}).decode()
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-client", max_retries=0,
                    default_headers={**headers, "x-gateway-config": config}, http_client=gateway.http_client())
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                   extra_body={"variables": VARIABLES})
    assert mock.calls(keyless)["requests"][-1]["headers"]["authorization"] == "Bearer sk-client"
    # an api_key the config sets itself is the caller's own: it replaces the slug's
    config = msgspec.json.encode({"prompt_id": prompt["id"], "api_key": "sk-own"}).decode()
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-client", max_retries=0,
                    default_headers={**headers, "x-gateway-config": config}, http_client=gateway.http_client())
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                   extra_body={"variables": VARIABLES})
    assert mock.calls(base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-own"
