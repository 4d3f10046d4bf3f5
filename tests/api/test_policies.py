"""The policy routes through the real gateway: create, read, list with filters and pages, update, archive, every
validation rule as a 400 naming the field, and who may use them."""

from __future__ import annotations

import re
import tempfile
import uuid
from datetime import UTC, datetime

import pytest

from tests.support.http import post, request
from tests.support.inprocess import start_in_process
from tests.support.keys import add_key
from tests.support.policies import (
    ADMIN,
    RATE,
    USAGE,
    chat,
    chat_headers,
    concurrently,
    create,
    get,
    rate_limit,
    same_day,
    statuses,
)
from tests.support.servers import start_gateway

MEMBER_KEY = "member-key-" + uuid.uuid4().hex
OTHER_KEY = "other-workspace-key-" + uuid.uuid4().hex
BOUNDS_KEY = "bounds-workspace-key-" + uuid.uuid4().hex
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)$")

USAGE_BODY = {"name": "Monthly cost per user", "conditions": [{"key": "workspace_id", "value": "*"}],
              "group_by": [{"key": "metadata._user"}], "type": "cost", "credit_limit": 10, "alert_threshold": 8,
              "periodic_reset": "monthly"}
RATE_BODY = {"name": "rpm per key", "conditions": [{"key": "api_key", "value": "*"}],
             "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rpm", "value": 100}


@pytest.fixture(scope="module")
def gw():
    data_dir = tempfile.mkdtemp(prefix="gw-policies-")
    add_key(data_dir, MEMBER_KEY, "default", "member")
    add_key(data_dir, OTHER_KEY, "ws-other", "admin")
    add_key(data_dir, BOUNDS_KEY, "ws-bounds", "admin")
    server = start_in_process(data_dir=data_dir)
    yield server
    server.stop()


def test_create_answers_the_id_and_object_and_get_shows_usage_and_reset_times(gw):
    created = post(gw.url + USAGE, USAGE_BODY, ADMIN)
    assert created.status == 200
    doc = created.json()
    assert doc["object"] == "policy_usage_limits"
    assert str(uuid.UUID(doc["id"])) == doc["id"]
    got = get(gw, USAGE, doc["id"])
    assert got["id"] == doc["id"] and got["status"] == "active" and got["type"] == "cost"
    assert got["conditions"] == USAGE_BODY["conditions"] and got["group_by"] == USAGE_BODY["group_by"]
    assert got["credit_limit"] == 10 and got["alert_threshold"] == 8 and got["periodic_reset"] == "monthly"
    assert got["workspace_id"] == "default" and got["organisation_id"] == "default"
    assert got["current_usage"] == 0 and got["value_key_usage_map"] == {} and got["alerts"] == []
    assert got["last_reset_at"] is None
    reset = datetime.fromisoformat(got["next_usage_reset_at"].replace("Z", "+00:00"))
    assert (reset.day, reset.hour, reset.minute, reset.second) == (1, 0, 0, 0)
    assert reset > datetime.now(UTC)


def test_rate_limit_create_and_list_items_carry_the_listed_fields(gw):
    policy_id = create(gw, RATE, RATE_BODY)
    listed = request("GET", gw.url + RATE, headers=ADMIN).json()
    assert listed["object"] == "list" and listed["total"] == len(listed["data"])
    item = next(p for p in listed["data"] if p["id"] == policy_id)
    assert item["value"] == 100 and item["name"] == "rpm per key"
    assert item["workspace_id"] == "default" and item["organisation_id"] == "default"
    assert ISO.match(item["created_at"]) and ISO.match(item["last_updated_at"])
    assert item["conditions"] == [{"key": "api_key", "value": "*"}] and item["group_by"] == [{"key": "api_key"}]
    assert item["type"] == "requests" and item["unit"] == "rpm" and item["status"] == "active"


def test_rate_limit_list_filters_and_pages(gw):
    run = uuid.uuid4().hex[:8]
    ids = [create(gw, RATE, {**RATE_BODY, "name": f"{run}-{i}", "type": t, "unit": u})
           for i, (t, u) in enumerate([("requests", "rpm"), ("tokens", "rph"), ("tokens", "rpd")])]

    def listed(query: str) -> dict:
        resp = request("GET", f"{gw.url}{RATE}?{query}", headers=ADMIN)
        assert resp.status == 200, resp.text
        return resp.json()

    tokens = [p["id"] for p in listed("type=tokens")["data"]]
    assert ids[1] in tokens and ids[2] in tokens and ids[0] not in tokens
    assert [p["id"] for p in listed("type=tokens&unit=rph")["data"] if p["id"] in ids] == [ids[1]]
    everything = listed("status=active")
    assert all(p["status"] == "active" for p in everything["data"])
    first = listed("page_size=2&current_page=0")
    second = listed("page_size=2&current_page=1")
    assert len(first["data"]) == 2 and first["total"] == everything["total"] == second["total"]
    assert not {p["id"] for p in first["data"]} & {p["id"] for p in second["data"]}
    assert listed("workspace_id=default")["total"] == everything["total"]
    for bad, param in (("status=gone", "status"), ("type=cost", "type"), ("unit=rps", "unit"),
                       ("page_size=-1", "page_size"), ("current_page=x", "current_page")):
        resp = request("GET", f"{gw.url}{RATE}?{bad}", headers=ADMIN)
        assert resp.status == 400 and resp.json()["error"]["param"] == param, (bad, resp.text)


DROP = object()  # a field left out of the body


def body_with(base: dict, change: dict) -> dict:
    return {k: v for k, v in {**base, **change}.items() if v is not DROP}


USAGE_FAULTS = [
    ({"name": "x" * 256}, "name"),
    ({"conditions": []}, "conditions"),
    ({"group_by": []}, "group_by"),
    ({"conditions": DROP}, "conditions"),
    ({"type": DROP}, "type"),
    ({"credit_limit": DROP, "alert_threshold": DROP}, "credit_limit"),
    ({"type": "dollars"}, "type"),
    ({"credit_limit": -1}, "credit_limit"),
    ({"alert_threshold": -1}, "alert_threshold"),
    ({"alert_threshold": 10}, "alert_threshold"),
    ({"alert_threshold": 11}, "alert_threshold"),
    ({"periodic_reset": "daily"}, "periodic_reset"),
    ({"periodic_reset": DROP, "periodic_reset_days": 0}, "periodic_reset_days"),
    ({"periodic_reset": DROP, "periodic_reset_days": 366}, "periodic_reset_days"),
    ({"periodic_reset_days": 30}, "periodic_reset_days"),
    ({"conditions": [{"key": "user", "value": "x"}]}, "conditions[0].key"),
    ({"conditions": [{"key": "metadata.", "value": "x"}]}, "conditions[0].key"),
    ({"conditions": [{"key": "model", "value": ""}]}, "conditions[0].value"),
    ({"conditions": [{"key": "model", "value": []}]}, "conditions[0].value"),
    ({"conditions": [{"key": "model"}]}, "conditions[0].value"),
    ({"conditions": [{"key": "model", "value": "x", "excludes": ""}]}, "conditions[0].excludes"),
    ({"group_by": [{"key": "api_key"}, {"key": "api_key"}]}, "group_by[1].key"),
    ({"group_by": [{"key": "team"}]}, "group_by[0].key"),
    ({"type": "tokens", "credit_limit": 1.5, "alert_threshold": DROP}, "credit_limit"),
    ({"surprise": 1}, None),
    # numbers past the bounds (counters stay exact 64-bit integers in every store) are refused, never stored
    ({"credit_limit": 1e308}, "credit_limit"),
    ({"credit_limit": 10**30}, "credit_limit"),
    ({"credit_limit": 1_000_000_001, "alert_threshold": DROP}, "credit_limit"),
    ({"type": "tokens", "credit_limit": 10**15 + 1, "alert_threshold": DROP}, "credit_limit"),
    ({"type": "requests", "credit_limit": 2**63, "alert_threshold": DROP}, "credit_limit"),
    ({"alert_threshold": 1e308}, "alert_threshold"),
    ({"credit_limit": "10"}, "credit_limit"),
    ({"credit_limit": True}, "credit_limit"),
    ({"periodic_reset_days": 10**30, "periodic_reset": DROP}, "periodic_reset_days"),
]


@pytest.mark.parametrize("change,param", USAGE_FAULTS)
def test_every_usage_limit_rule_is_a_400_naming_the_field(gw, change, param):
    resp = post(gw.url + USAGE, body_with(USAGE_BODY, change), ADMIN)
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param, error


RATE_FAULTS = [
    ({"unit": "rps"}, "unit"),
    ({"type": "cost"}, "type"),
    ({"value": -1}, "value"),
    ({"value": 2.5}, "value"),
    ({"value": DROP}, "value"),
    ({"unit": DROP}, "unit"),
    ({"name": "n" * 256}, "name"),
    ({"group_by": []}, "group_by"),
    ({"value": 1e308}, "value"),
    ({"value": 10**30}, "value"),
    ({"value": 10**15 + 1}, "value"),
    ({"value": "100"}, "value"),
]


@pytest.mark.parametrize("change,param", RATE_FAULTS)
def test_every_rate_limit_rule_is_a_400_naming_the_field(gw, change, param):
    resp = post(gw.url + RATE, body_with(RATE_BODY, change), ADMIN)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


@pytest.mark.parametrize("body", [
    b'{"type": "tokens", "credit_limit": 1e400}', b'{"type": "tokens", "credit_limit": -1e400}',
    b'{"type": "tokens", "credit_limit": NaN}', b'{"type": "tokens", "credit_limit": Infinity}'])
def test_numbers_json_cannot_hold_are_a_400(gw, body):
    resp = post(gw.url + USAGE, body, ADMIN)
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["message"]


def largest_limits_hold(gateway, mock, key: str) -> None:
    """Limits at the bounds are accepted, and policies with them neither refuse nor break requests, however large
    the reservation a request asks for."""
    headers = {**ADMIN, "x-gateway-api-key": key}
    every = {"conditions": [{"key": "workspace_id", "value": "*"}], "group_by": [{"key": "model"}]}
    ids = [create(gateway, USAGE, {**every, "type": "cost", "credit_limit": 1_000_000_000,
                                   "alert_threshold": 999_999_999.5}, headers),
           create(gateway, USAGE, {**every, "type": "tokens", "credit_limit": 10**15}, headers),
           create(gateway, USAGE, {**every, "type": "requests", "credit_limit": 10**15}, headers),
           # a day's window: an amount larger than a rate limit fits an empty window (cut to the limit, by design),
           # so a minute's window that rolled over between the chats below would let a huge request through
           create(gateway, RATE, {**every, "type": "tokens", "unit": "rpd", "value": 10**15}, headers),
           create(gateway, RATE, {**every, "type": "requests", "unit": "rpd", "value": 10**15}, headers)]
    chat_to = {**chat_headers(mock.scenario([{}]), "bounds"), "x-gateway-api-key": key}
    for model, max_tokens in (("gpt-4o-mini", 16), ("unpriced-model", 10**12)):
        resp = chat(gateway.url, chat_to, model=model, max_tokens=max_tokens)
        assert resp.status == 200, resp.text
    for max_tokens in (10**15, 10**18, 2**63 - 1):  # reserves more than a limit can be: refused, never a 500
        huge = chat(gateway.url, chat_to, model="unpriced-model", max_tokens=max_tokens)
        assert huge.status in (400, 429), huge.text
        assert huge.json()["error"]["message"]
    for path, policy_id in zip((USAGE, USAGE, USAGE, RATE, RATE), ids):
        got = request("GET", f"{gateway.url}{path}/{policy_id}", headers=headers)
        assert got.status == 200, got.text
    assert request("GET", f"{gateway.url}{USAGE}/{ids[0]}", headers=headers).json()["credit_limit"] == 1_000_000_000


def test_the_largest_limits_are_stored_and_requests_still_pass(gw, mock):
    largest_limits_hold(gw, mock, BOUNDS_KEY)  # a workspace of its own: other tests' policies apply to every request


def test_the_largest_limits_hold_on_redis(mock, shared_redis):
    server = start_in_process(shared_redis)
    try:
        largest_limits_hold(server, mock, ADMIN["x-gateway-api-key"])
    finally:
        server.stop()


@pytest.mark.parametrize("path,body,change", [
    (USAGE, USAGE_BODY, {"credit_limit": 1e308}), (USAGE, USAGE_BODY, {"alert_threshold": 10**30}),
    (RATE, RATE_BODY, {"value": 1e308}), (RATE, RATE_BODY, {"value": 10**30})])
def test_an_update_past_the_bounds_is_a_400_and_changes_nothing(gw, path, body, change):
    policy_id = create(gw, path, body)
    resp = request("PUT", f"{gw.url}{path}/{policy_id}", body=change, headers=ADMIN)
    assert resp.status == 400, resp.text
    field = next(iter(change))
    assert resp.json()["error"]["param"] == field
    assert get(gw, path, policy_id)[field] == body[field]


def test_periodic_reset_days_is_accepted_and_resets_at_utc_midnight(gw):
    policy_id = create(gw, USAGE, body_with(USAGE_BODY, {"type": "tokens", "credit_limit": 1000,
                                                         "alert_threshold": DROP, "periodic_reset": DROP,
                                                         "periodic_reset_days": 3}))
    got = get(gw, USAGE, policy_id)
    assert got["periodic_reset_days"] == 3 and got["periodic_reset"] is None
    assert got["next_usage_reset_at"].endswith("T00:00:00.000Z")
    today = datetime.now(UTC).date()
    days = (datetime.fromisoformat(got["next_usage_reset_at"][:10]).date() - today).days
    assert days == 3


def test_update_changes_conditions_and_switching_the_period_clears_the_other(gw):
    policy_id = create(gw, USAGE, USAGE_BODY)
    new_conditions = [{"key": "model", "value": ["gpt-4o", "gpt-4o-mini"]}, {"key": "provider", "value": "vendorA"}]
    resp = request("PUT", f"{gw.url}{USAGE}/{policy_id}",
                   body={"conditions": new_conditions, "periodic_reset_days": 7, "name": "renamed"}, headers=ADMIN)
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert doc["conditions"] == new_conditions and doc["name"] == "renamed"
    assert doc["periodic_reset_days"] == 7 and doc["periodic_reset"] is None
    assert get(gw, USAGE, policy_id)["conditions"] == new_conditions
    fixed = request("PUT", f"{gw.url}{USAGE}/{policy_id}", body={"type": "tokens"}, headers=ADMIN)
    assert fixed.status == 400 and fixed.json()["error"]["param"] == "type"
    limit = request("PUT", f"{gw.url}{USAGE}/{policy_id}", body={"credit_limit": 5}, headers=ADMIN)
    assert limit.status == 400 and limit.json()["error"]["param"] == "alert_threshold"  # 8 is not below 5
    empty = request("PUT", f"{gw.url}{USAGE}/{policy_id}", body={}, headers=ADMIN)
    assert empty.status == 400


def test_rate_limit_update(gw):
    policy_id = create(gw, RATE, RATE_BODY)
    resp = request("PUT", f"{gw.url}{RATE}/{policy_id}",
                   body={"value": 5, "unit": "rph", "conditions": [{"key": "model", "value": "gpt-4o*"}]},
                   headers=ADMIN)
    assert resp.status == 200, resp.text
    got = get(gw, RATE, policy_id)
    assert (got["value"], got["unit"], got["conditions"]) == (5, "rph", [{"key": "model", "value": "gpt-4o*"}])
    assert got["last_updated_at"] >= got["created_at"]
    group = request("PUT", f"{gw.url}{RATE}/{policy_id}", body={"group_by": [{"key": "model"}]}, headers=ADMIN)
    assert group.status == 400 and group.json()["error"]["param"] == "group_by"


@pytest.mark.parametrize("path,body", [(USAGE, USAGE_BODY), (RATE, RATE_BODY)])
def test_delete_archives_and_the_status_filter_sees_it(gw, path, body):
    policy_id = create(gw, path, body)
    archived = request("DELETE", f"{gw.url}{path}/{policy_id}", headers=ADMIN)
    assert archived.status == 200
    assert archived.json() == {"id": policy_id, "object": "policy_usage_limits", "deleted": True}
    assert get(gw, path, policy_id)["status"] == "archived"

    def ids(status: str) -> set[str]:
        return {p["id"] for p in request("GET", f"{gw.url}{path}?status={status}", headers=ADMIN).json()["data"]}

    assert policy_id in ids("archived") and policy_id not in ids("active")
    assert request("DELETE", f"{gw.url}{path}/{policy_id}", headers=ADMIN).status == 200  # idempotent
    restored = request("PUT", f"{gw.url}{path}/{policy_id}", body={"status": "active"}, headers=ADMIN)
    assert restored.status == 200 and restored.json()["status"] == "active"


@pytest.mark.parametrize("path,body", [(USAGE, USAGE_BODY), (RATE, RATE_BODY)])
def test_both_kinds_say_one_object_on_create_read_list_update_and_archive(gw, path, body):
    created = post(gw.url + path, body, ADMIN)
    assert created.status == 200 and created.json()["object"] == "policy_usage_limits"
    policy_id = created.json()["id"]
    assert get(gw, path, policy_id)["object"] == "policy_usage_limits"
    listed = request("GET", f"{gw.url}{path}", headers=ADMIN).json()["data"]
    assert {p["object"] for p in listed} == {"policy_usage_limits"} and policy_id in {p["id"] for p in listed}
    updated = request("PUT", f"{gw.url}{path}/{policy_id}", body={"name": "renamed"}, headers=ADMIN)
    assert updated.status == 200 and updated.json()["object"] == "policy_usage_limits"
    deletes = {request("DELETE", f"{gw.url}{path}/{policy_id}", headers=ADMIN).json()["object"] for _ in range(2)}
    assert deletes == {"policy_usage_limits"}


def test_usage_limit_list_filters(gw):
    policy_id = create(gw, USAGE, {**USAGE_BODY, "type": "requests", "credit_limit": 5, "alert_threshold": 1})
    listed = request("GET", f"{gw.url}{USAGE}?type=requests&status=active", headers=ADMIN).json()
    assert policy_id in {p["id"] for p in listed["data"]}
    assert all(p["type"] == "requests" for p in listed["data"])
    assert all("current_usage" in p and "next_usage_reset_at" in p for p in listed["data"])


@pytest.mark.parametrize("method,suffix", [("POST", ""), ("GET", ""), ("GET", "/x"), ("PUT", "/x"),
                                           ("DELETE", "/x")])
@pytest.mark.parametrize("path", [USAGE, RATE])
def test_member_keys_get_403_and_unknown_keys_401(gw, method, suffix, path):
    body = USAGE_BODY if path == USAGE else RATE_BODY
    member = request(method, gw.url + path + suffix, body=body if method in ("POST", "PUT") else None,
                     headers={"x-gateway-api-key": MEMBER_KEY, "content-type": "application/json"})
    assert member.status == 403, member.text
    assert request(method, gw.url + path + suffix, headers={"x-gateway-api-key": "nope"}).status == 401


def test_unknown_ids_and_other_workspaces_answer_404(gw):
    policy_id = create(gw, USAGE, USAGE_BODY)
    missing = request("GET", f"{gw.url}{USAGE}/{uuid.uuid4()}", headers=ADMIN)
    assert missing.status == 404 and missing.json()["error"]["param"] == "policy_id"
    other = {"x-gateway-api-key": OTHER_KEY, "content-type": "application/json"}
    for method in ("GET", "PUT", "DELETE"):
        resp = request(method, f"{gw.url}{USAGE}/{policy_id}", body={"name": "x"} if method == "PUT" else None,
                       headers=other)
        assert resp.status == 404, (method, resp.text)
    own = request("GET", gw.url + USAGE, headers=other).json()
    assert policy_id not in {p["id"] for p in own["data"]}
    created = post(gw.url + RATE, RATE_BODY, other)
    assert created.status == 200
    assert request("GET", f"{gw.url}{RATE}/{created.json()['id']}", headers=ADMIN).status == 404


def test_records_survive_a_restart():
    data_dir = tempfile.mkdtemp(prefix="gw-policies-restart-")
    first = start_in_process(data_dir=data_dir)
    try:
        policy_id = create(first, RATE, RATE_BODY)
    finally:
        first.stop()
    second = start_in_process(data_dir=data_dir)
    try:
        assert get(second, RATE, policy_id)["value"] == 100
    finally:
        second.stop()


def test_requests_sent_right_after_a_create_meet_the_policy_on_every_worker(mock):
    """Two workers, default settings, a fresh connection per request (both workers take some): a burst sent as
    soon as the create has answered is limited exactly, as is a burst sent right after an archive is not."""
    server = start_gateway(workers=2)
    try:
        base = mock.scenario()
        for _ in range(2):  # twice: the first create must not only have been lucky
            run = uuid.uuid4().hex[:12]
            policy_id = rate_limit(server, run, 5)
            answers = same_day(lambda run=run: concurrently([server.url], chat_headers(base, run), 20))
            assert statuses(answers) == {200: 5, 429: 15}
        assert request("DELETE", f"{server.url}{RATE}/{policy_id}", headers=ADMIN).status == 200
        assert statuses(concurrently([server.url], chat_headers(base, run), 10)) == {200: 10}
    finally:
        server.stop()
