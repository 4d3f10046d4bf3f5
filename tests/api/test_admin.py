"""Query parameters of every list route (``gateway.api.admin.known_query``): an unknown name or provider is a 400
naming it, the names users try are read as the ones they stand for, and what the openai SDK sends still works."""

from __future__ import annotations

import io

import pytest
from openai import BadRequestError, OpenAI

from gateway.api.admin import known_query
from gateway.http.errors import InvalidRequest
from tests.support.controlplane import api, create_key
from tests.support.servers import ADMIN_KEY

LISTS = [
    "/v1/api-keys", "/v1/configs", "/v1/providers", "/v1/prompts", "/v1/prompts/pp-nosuch/versions",
    "/v1/guardrails", "/v1/policies/usage-limits", "/v1/policies/rate-limits", "/v1/models", "/v1/batches",
    "/v1/files", "/v1/fine_tuning/jobs", "/v1/fine_tuning/jobs/ftjob-nosuch/events",
    "/v1/responses/resp_nosuch/input_items", "/v1/logs",
]


def test_known_names_pass_aliases_are_renamed_and_anything_else_is_a_400_naming_it():
    known = ("workspace_id", "page_size", "metadata")
    assert known_query({"workspace": "a", "pageSize": "2", "metadata[k]": "v"}, known) == {
        "workspace_id": "a", "page_size": "2", "metadata[k]": "v"}
    assert known_query({"workspace": "a", "workspace_id": "a"}, known) == {"workspace_id": "a"}
    for query, param in (({"colour": "red"}, "colour"), ({"currentPage": "1"}, "currentPage"),
                         ({"workspace": "a", "workspace_id": "b"}, "workspace")):
        with pytest.raises(InvalidRequest) as caught:
            known_query(query, known)
        assert caught.value.param == param and param in caught.value.message


@pytest.mark.parametrize("path", LISTS)
def test_every_list_route_answers_400_naming_an_unknown_query_parameter(gateway, path):
    resp = api(gateway, "GET", f"{path}?limit_to=5")
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == "limit_to" and "unknown query parameter 'limit_to'" in error["message"]
    assert api(gateway, "GET", f"{path}?limit_to=5", key="nope").status == 401  # the key is checked first


def test_the_spec_filters_of_rate_limit_policies_and_the_names_users_try(gateway):
    admin = create_key(gateway)
    # limits no request of the session's other tests can reach, archived at the end: the default workspace is shared
    body = {"name": "rpm", "conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}],
            "type": "requests", "unit": "rpm", "value": 1_000_000}
    mine = api(gateway, "POST", "/v1/policies/rate-limits", body, admin["key"]).json()["id"]
    other = api(gateway, "POST", "/v1/policies/rate-limits", {**body, "unit": "rph"}).json()["id"]  # default ws
    try:
        _check_rate_limit_filters(gateway, admin, mine, other)
    finally:
        assert api(gateway, "DELETE", f"/v1/policies/rate-limits/{other}").status == 200


def _check_rate_limit_filters(gateway, admin: dict, mine: str, other: str) -> None:

    def ids(query: str) -> list[str]:
        resp = api(gateway, "GET", f"/v1/policies/rate-limits?{query}")
        assert resp.status == 200, resp.text
        return [p["id"] for p in resp.json()["data"]]

    ws = admin["workspace_id"]
    assert ids(f"workspace_id={ws}") == ids(f"workspace={ws}") == ids(f"workspaceId={ws}") == [mine]
    assert other in ids("") and mine not in ids("")
    assert ids(f"workspace={ws}&status=active&type=requests&unit=rpm&page_size=1&current_page=0") == [mine]
    assert ids(f"workspace={ws}&pageSize=1&currentPage=1") == [] and ids(f"workspace={ws}&unit=rph") == []
    for query, param in (("unit=rpx", "unit"), ("type=cost", "type"), ("status=gone", "status"),
                         ("page_size=-1", "page_size"), ("workspace=a&workspace_id=b", "workspace"),
                         ("archived=true", "archived")):
        resp = api(gateway, "GET", f"/v1/policies/rate-limits?{query}")
        assert resp.status == 400 and resp.json()["error"]["param"] == param, (query, resp.text)
    # another workspace named by a key of its own workspace is the 404 of a missing one, whichever name it uses
    resp = api(gateway, "GET", "/v1/policies/rate-limits?workspace=default", key=admin["key"])
    assert resp.status == 404 and resp.json()["error"]["param"] == "workspace_id"


def test_a_provider_filter_naming_no_provider_is_a_400(gateway, mock):
    admin = create_key(gateway)
    slug = {"slug": "team", "provider": "vendorA", "api_key": "sk-team", "custom_host": mock.scenario() + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin["key"]).status == 201
    for path in ("/v1/models", "/v1/providers", "/v1/logs"):
        resp = api(gateway, "GET", f"{path}?provider=nosuch", key=admin["key"])
        assert resp.status == 400, (path, resp.text)
        assert resp.json()["error"]["param"] == "provider" and "'nosuch'" in resp.json()["error"]["message"]
        assert api(gateway, "GET", f"{path}?provider=anthropic", key=admin["key"]).status == 200
    assert api(gateway, "GET", "/v1/providers?provider=vendorA", key=admin["key"]).json()["total"] == 1
    for wanted in ("team", "@team"):  # a slug of the workspace filters the models list
        resp = api(gateway, "GET", f"/v1/models?provider={wanted}", key=admin["key"])
        assert resp.status == 200 and {m["slug"] for m in resp.json()["data"]} == {"team"}, resp.text
    resp = api(gateway, "GET", "/v1/models?provider=@team", key=create_key(gateway)["key"])  # not its slug
    assert resp.status == 400 and resp.json()["error"]["param"] == "provider"


def test_the_list_calls_of_the_openai_sdk_keep_working(gateway, openai_client, mock):
    plain = OpenAI(base_url=f"{gateway.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60,
                   http_client=gateway.http_client())
    stored = plain.files.create(file=("in.jsonl", io.BytesIO(b'{"custom_id": "a"}\n')), purpose="batch").id
    assert stored in [f.id for f in plain.files.list(limit=100, order="asc", purpose="batch")]
    assert plain.files.list(limit=1, after=stored, order="desc").object == "list"
    assert plain.batches.list(limit=5).object == "list"
    assert plain.models.list().object == "list"
    provider = openai_client(mock.scenario() + "/v1")
    assert provider.fine_tuning.jobs.list(limit=2, metadata={"team": "a"}).object == "list"
    assert provider.files.list(limit=5, order="asc", purpose="batch").object == "list"
    with pytest.raises(BadRequestError) as caught:
        plain.files.list(extra_query={"sort": "name"})
    assert caught.value.param == "sort"
