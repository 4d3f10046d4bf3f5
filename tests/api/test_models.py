"""``GET /v1/models`` through the real gateway: the models of the workspace's slugs (and the request's provider),
filters, paging and a total_count that counts the filtered models."""

from __future__ import annotations

from tests.support.controlplane import api, create_key


def slug(server, admin: dict, name: str, provider: str, base: str, **extra) -> None:
    body = {"slug": name, "provider": provider, "api_key": f"sk-{name}", "custom_host": base + "/v1", **extra}
    resp = api(server, "POST", "/v1/providers", body, admin["key"])
    assert resp.status == 201, resp.text


def models(server, key: str, query: str = "", **headers: str) -> dict:
    resp = api(server, "GET", f"/v1/models{query}", key=key, **headers)
    assert resp.status == 200, resp.text
    return resp.json()


def test_models_of_every_slug_with_filters_and_a_filtered_total(gateway, mock):
    admin = create_key(gateway)
    openai_base = mock.scenario([{"reply": "gpt-4o, gpt-4o-mini, o3"}])
    claude_base = mock.scenario()
    slug(gateway, admin, "oa", "vendorA", openai_base)
    slug(gateway, admin, "claude", "anthropic", claude_base)
    slug(gateway, admin, "rerank", "cohere", mock.scenario())  # no models list: contributes nothing
    doc = models(gateway, admin["key"])
    assert doc["object"] == "list" and doc["errors"] == []
    ids = [(m["slug"], m["id"]) for m in doc["data"]]
    assert ids == [("claude", "claude-haiku-4-5"), ("claude", "claude-sonnet-4-5"), ("oa", "gpt-4o"),
                   ("oa", "gpt-4o-mini"), ("oa", "o3")]
    assert doc["total_count"] == doc["total"] == 5
    first = doc["data"][0]
    assert first["object"] == "model" and first["provider"] == "anthropic" and first["created"] > 0
    # the providers were asked with the slugs' own credentials
    sent = mock.calls(openai_base)["requests"][-1]
    assert sent["method"] == "GET" and sent["headers"]["authorization"] == "Bearer sk-oa"
    assert mock.calls(claude_base)["requests"][-1]["headers"]["x-api-key"] == "sk-claude"
    by_provider = models(gateway, admin["key"], "?provider=anthropic")
    assert by_provider["total_count"] == 2 and {m["slug"] for m in by_provider["data"]} == {"claude"}
    assert models(gateway, admin["key"], "?provider=@oa")["total_count"] == 3
    searched = models(gateway, admin["key"], "?search=4O")
    assert searched["total_count"] == 2 and [m["id"] for m in searched["data"]] == ["gpt-4o", "gpt-4o-mini"]
    paged = models(gateway, admin["key"], "?search=gpt&page_size=1&current_page=1")
    assert paged["total_count"] == 2 and [m["id"] for m in paged["data"]] == ["gpt-4o-mini"]


def test_lists_are_cached_briefly(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario()
    slug(gateway, admin, "cached", "vendorA", base)
    models(gateway, admin["key"])
    models(gateway, admin["key"])
    assert mock.calls(base)["calls"] == 1


def test_a_failing_source_is_reported_and_the_others_still_answer(gateway, mock):
    admin = create_key(gateway)
    slug(gateway, admin, "good", "vendorA", mock.scenario())
    slug(gateway, admin, "bad", "vendorA", mock.scenario([{"status": 401, "message": "bad key"}]))
    doc = models(gateway, admin["key"])
    assert {m["slug"] for m in doc["data"]} == {"good"}
    assert doc["errors"] == [{"source": "@bad", "message": "bad key"}]


def test_the_requests_own_provider_is_listed_too(gateway, mock):
    admin = create_key(gateway)
    base = mock.scenario([{"reply": "local-model"}])
    doc = models(gateway, admin["key"], **{"x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
                                            "authorization": "Bearer sk-req"})
    assert [(m["id"], m["slug"], m["provider"]) for m in doc["data"]] == [("local-model", None, "vendorA")]


def test_member_keys_list_models_and_workspaces_stay_apart(gateway, mock):
    admin = create_key(gateway)
    slug(gateway, admin, "mine", "vendorA", mock.scenario())
    member = create_key(gateway, "member", admin["workspace_id"])
    assert models(gateway, member["key"])["total_count"] == 3
    other = create_key(gateway)
    assert models(gateway, other["key"])["total_count"] == 0
    narrow = create_key(gateway, "member", admin["workspace_id"], scopes=["inference"])
    assert api(gateway, "GET", "/v1/models", key=narrow["key"]).status == 403
    bad = api(gateway, "GET", "/v1/models?page_size=-1", key=admin["key"])
    assert bad.status == 400 and bad.json()["error"]["param"] == "page_size"
