"""``/v1/guardrails``: saved guardrails created, validated, listed with paging and ids, changed and deleted, and
used by configs that name them, through the real gateway."""

from __future__ import annotations

import json
import time
import uuid

from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY

ADMIN = {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"}
SHORT = {"name": "short prompts", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 3}}],
         "deny": True, "on_fail": {"feedback": {"value": -1}}}


def create(gateway, body: dict, query: str = ""):
    return post(f"{gateway.url}/v1/guardrails{query}", body, ADMIN)


def test_create_get_update_delete(gateway):
    created = create(gateway, SHORT)
    assert created.status == 201, created.text
    record = created.json()
    assert record["id"].startswith("gr_") and record["object"] == "guardrail" and record["workspace_id"] == "default"
    assert record["deny"] is True and record["async"] is False and record["created_at"].endswith("Z")
    url = f"{gateway.url}/v1/guardrails/{record['id']}"
    assert request("GET", url, headers=ADMIN).json() == record
    changed = request("PUT", url, {"name": "renamed", "deny": False}, ADMIN)
    assert changed.status == 200 and changed.json()["name"] == "renamed" and changed.json()["checks"] == SHORT["checks"]
    assert request("PUT", url, {"async": True, "deny": True}, ADMIN).json()["error"]["param"] == "async"
    deleted = request("DELETE", url, headers=ADMIN)
    assert deleted.json() == {"id": record["id"], "object": "guardrail", "deleted": True}
    assert request("GET", url, headers=ADMIN).status == 404


def test_bad_bodies_are_400s_naming_the_field(gateway):
    for body, param in (
        ({**SHORT, "checks": [{"id": "default.regexMatch", "parameters": {"rule": "(a+)+"}}]},
         "checks[0].parameters.rule"),
        ({**SHORT, "checks": [{"id": "default.nope", "parameters": {}}]}, "checks[0].id"),
        ({**SHORT, "colour": "red"}, "colour"),
        ({"checks": SHORT["checks"]}, "name"),
        ({**SHORT, "name": "n" * 256}, "name"),
    ):
        resp = create(gateway, body)
        assert resp.status == 400 and resp.json()["error"]["param"] == param, resp.text
    assert post(f"{gateway.url}/v1/guardrails", b"not json", ADMIN).json()["error"]["param"] == "body"


def test_a_name_may_be_255_characters_as_on_every_other_record(gateway):
    resp = create(gateway, {**SHORT, "name": "n" * 255})
    assert resp.status == 201, resp.text
    assert resp.json()["name"] == "n" * 255
    assert "1..255 characters" in create(gateway, {**SHORT, "name": "n" * 256}).json()["error"]["message"]


def test_bodies_that_are_not_utf8_or_nest_too_deeply_are_400s_naming_the_body(gateway):
    record = create(gateway, SHORT).json()
    for body in (b'{"name": "\xff"}', b'{"\xc3\x28": 1}', b'{"name": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
        for method, url in (("POST", f"{gateway.url}/v1/guardrails"),
                            ("PUT", f"{gateway.url}/v1/guardrails/{record['id']}")):
            resp = request(method, url, body, ADMIN)
            assert resp.status == 400, (method, body[:20], resp.text)
            assert resp.json()["error"]["param"] == "body"


def test_listing_pages_newest_first_and_filters_by_ids(gateway):
    workspace = f"ws-{uuid.uuid4().hex[:8]}"
    ids = []
    for i in range(5):
        ids.append(create(gateway, {**SHORT, "name": f"g{i}", "workspace_id": workspace}).json()["id"])
        time.sleep(0.002)  # distinct creation times
    page = request("GET", f"{gateway.url}/v1/guardrails?workspace_id={workspace}&page_size=2", headers=ADMIN).json()
    assert page["object"] == "list" and page["total"] == 5 and page["has_more"] is True
    assert [g["name"] for g in page["data"]] == ["g4", "g3"] and page["current_page"] == 0 and page["page_size"] == 2
    last = request("GET", f"{gateway.url}/v1/guardrails?workspace_id={workspace}&page_size=2&current_page=2",
                   headers=ADMIN).json()
    assert [g["name"] for g in last["data"]] == ["g0"] and last["has_more"] is False
    picked = request("GET", f"{gateway.url}/v1/guardrails?workspace_id={workspace}&ids={ids[1]},{ids[3]}",
                     headers=ADMIN).json()
    assert sorted(g["id"] for g in picked["data"]) == sorted([ids[1], ids[3]]) and picked["total"] == 2
    mine = request("GET", f"{gateway.url}/v1/guardrails?ids={ids[0]}", headers=ADMIN).json()
    assert mine["data"] == []  # another workspace's guardrails are not listed
    bad = request("GET", f"{gateway.url}/v1/guardrails?page_size=0", headers=ADMIN)
    assert bad.status == 400 and bad.json()["error"]["param"] == "page_size"


def chat(gateway, base: str, guardrails: list):
    cfg = {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1", "input_guardrails": guardrails}
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "four words right here"}]}
    return post(gateway.url + "/v1/chat/completions", body, {**ADMIN, "x-gateway-config": json.dumps(cfg)})


def test_configs_use_saved_guardrails_by_id_and_see_changes(gateway, mock):
    base = mock.scenario()
    record = create(gateway, SHORT).json()
    denied = chat(gateway, base, [record["id"]])
    assert denied.status == 446
    assert denied.json()["hook_results"]["before_request_hooks"][0]["id"] == record["id"]
    softened = chat(gateway, base, [{"id": record["id"], "deny": False}])  # the item's own flags win
    assert softened.status == 246
    request("PUT", f"{gateway.url}/v1/guardrails/{record['id']}", {"deny": False}, ADMIN)
    assert chat(gateway, base, [record["id"]]).status == 246
    request("DELETE", f"{gateway.url}/v1/guardrails/{record['id']}", headers=ADMIN)
    gone = chat(gateway, base, [record["id"]])
    assert gone.status == 400 and gone.json()["error"]["param"] == "input_guardrails[0]"
    assert record["id"] in gone.json()["error"]["message"]


def test_a_guardrail_of_another_workspace_is_unknown(gateway, mock):
    elsewhere = create(gateway, {**SHORT, "workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}).json()
    resp = chat(gateway, mock.scenario(), [elsewhere["id"]])
    assert resp.status == 400 and resp.json()["error"]["param"] == "input_guardrails[0]"
    assert request("GET", f"{gateway.url}/v1/guardrails/{elsewhere['id']}", headers=ADMIN).status == 404


def test_every_worker_sees_a_changed_guardrail(mock):
    from tests.support.servers import start_gateway

    server = start_gateway(workers=2)
    base = mock.scenario()
    try:
        record = create(server, SHORT).json()
        denied: set[str] = set()
        for _ in range(200):  # until both workers have read and kept the record (a new connection each time)
            resp = chat(server, base, [record["id"]])
            assert resp.status == 446
            denied.add(resp.headers["x-gateway-trace-id"][:16])
            if len(denied) == 2:
                break
        assert len(denied) == 2
        request("PUT", f"{server.url}/v1/guardrails/{record['id']}", {"deny": False}, ADMIN)
        deadline = time.monotonic() + 10
        seen: set[str] = set()
        while len(seen) < 2:  # the records watcher empties the other worker's cache within about 250 ms
            assert time.monotonic() < deadline, f"only workers {seen} saw the change"
            resp = chat(server, base, [record["id"]])
            if resp.status == 246:
                seen.add(resp.headers["x-gateway-trace-id"][:16])
            else:
                assert resp.status == 446
    finally:
        server.stop()
