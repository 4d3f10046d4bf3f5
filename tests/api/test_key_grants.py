"""What a gateway key may hand out, through the real gateway: a key creates, rotates and revokes only keys within its
own role and scopes (403 naming what it lacks), in its own workspace, and may always revoke itself; the root key may
do anything."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path

import pytest

from gateway.controlplane.keys import DEFAULT_SCOPES, SCOPES, ApiKeys, KeyRecord, check_grant
from gateway.http.errors import Forbidden
from gateway.state.sqlite import SQLiteStateStore
from tests.support.controlplane import api, chat, create_key, new_workspace
from tests.support.inprocess import start_in_process
from tests.support.servers import ADMIN_KEY

ALL = tuple(SCOPES)
#: the scopes whose every subset the tests try: the member's defaults and two admin scopes (every subset of all
#: nineteen would be half a million keys); ``keys.write`` is the scope the key routes that change keys need
SAMPLE = ("inference", "prompts.run", "models.read", "logs.read", "keys.write", "providers.read")
ROLES = ("admin", "member")
SUBSETS = [list(c) for n in range(len(SAMPLE) + 1) for c in itertools.combinations(SAMPLE, n)]


def subset_id(scopes: list[str]) -> str:
    return "+".join(scopes) or "none"


def refused(resp, code: str, param: str, names: str) -> None:
    assert resp.status == 403, resp.text
    error = resp.json()["error"]
    assert error["type"] == "permission_error" and error["code"] == code, error
    assert error["param"] == param and names in error["message"], error


def key_ids(server, workspace: str) -> set[str]:
    listed = api(server, "GET", f"/v1/api-keys?workspace_id={workspace}").json()
    return {k["id"] for k in listed["data"]}


def test_the_rule_over_every_role_and_scope_subset_of_caller_and_new_key():
    """The rule itself, over every subset of the sample (2 x 64 callers x 2 x 64 new keys): allowed exactly when the
    new key's role is no higher and its scopes are a subset; the 403 names the first scope lacking. The HTTP tests
    below sample it."""
    rank = {"member": 0, "admin": 1}
    for caller_role, caller_scopes, role, scopes in itertools.product(ROLES, SUBSETS, ROLES, SUBSETS):
        caller = KeyRecord("ws", caller_role, scopes=frozenset(caller_scopes))
        lacking = [s for s in scopes if s not in caller_scopes]
        try:
            check_grant(caller, role, scopes, param="scopes")
        except Forbidden as error:
            assert rank[role] > rank[caller_role] or lacking
            expected = "missing_role" if rank[role] > rank[caller_role] else "missing_scope"
            assert error.code == expected
            if expected == "missing_scope":
                assert f"'{lacking[0]}'" in error.message
        else:
            assert rank[role] <= rank[caller_role] and not lacking
        root = KeyRecord("ws", caller_role, root=True, scopes=frozenset(caller_scopes))
        check_grant(root, role, scopes, param="scopes", root=True)  # the root key may grant anything
        check_grant(None, role, scopes, param="scopes", root=True)  # and so may the operator's command line


def test_the_issues_narrowed_admin_cannot_mint_itself_a_full_key(gateway, mock):
    narrow = create_key(gateway, "admin", scopes=["models.read"])
    assert chat(gateway, narrow["key"], mock.scenario()).json()["error"]["code"] == "missing_scope"
    resp = api(gateway, "POST", "/v1/api-keys", {"name": "wider", "role": "admin"}, narrow["key"])
    refused(resp, "missing_scope", "x-gateway-api-key", "'keys.write'")  # it may not make keys at all
    assert key_ids(gateway, narrow["workspace_id"]) == {narrow["id"]}  # nothing was created
    # given keys.write, it may create keys within its own scopes, and they get no more than asked
    writer = create_key(gateway, "admin", narrow["workspace_id"], scopes=["models.read", "keys.write"])
    resp = api(gateway, "POST", "/v1/api-keys", {"name": "wider", "role": "admin"}, writer["key"])
    refused(resp, "missing_scope", "scopes", "'inference'")
    child = create_key(gateway, "admin", narrow["workspace_id"], writer["key"], scopes=["models.read"])
    assert child["scopes"] == ["models.read"]
    assert chat(gateway, child["key"], mock.scenario()).status == 403


@pytest.mark.parametrize("role", ["admin", "member"])
@pytest.mark.parametrize("scopes", SUBSETS, ids=subset_id)
def test_a_key_creates_and_rotates_only_keys_within_its_role_and_scopes(gateway, role, scopes):
    caller = create_key(gateway, role, scopes=scopes)
    workspace = caller["workspace_id"]
    full_admin = create_key(gateway, "admin", workspace)  # made by the root key
    if role == "member" or "keys.write" not in scopes:  # it reaches no route that changes keys
        for resp in (api(gateway, "POST", "/v1/api-keys", {"name": "x", "role": "member", "scopes": []},
                         caller["key"]),
                     api(gateway, "POST", f"/v1/api-keys/{full_admin['id']}/rotate", key=caller["key"]),
                     api(gateway, "DELETE", f"/v1/api-keys/{full_admin['id']}", key=caller["key"])):
            lacks = "admin" if role == "member" else "'keys.write'"
            assert resp.status == 403 and lacks in resp.json()["error"]["message"], resp.text
        assert key_ids(gateway, workspace) == {caller["id"], full_admin["id"]}
        return
    made = {caller["id"], full_admin["id"]}
    for target_role in ("admin", "member"):
        # exactly its own scopes, and any part of them: allowed
        for given in (scopes, scopes[:1], []):
            child = create_key(gateway, target_role, workspace, caller["key"], scopes=given)
            assert child["scopes"] == given and child["role"] == target_role
            made.add(child["id"])
            rotated = api(gateway, "POST", f"/v1/api-keys/{child['id']}/rotate", key=caller["key"])
            assert rotated.status == 200 and rotated.json()["scopes"] == given, rotated.text
        # one scope more than it has: 403 naming that scope, nothing created
        for extra in (s for s in SAMPLE if s not in scopes):
            body = {"name": "wider", "role": target_role, "scopes": [*scopes, extra]}
            refused(api(gateway, "POST", "/v1/api-keys", body, caller["key"]), "missing_scope", "scopes",
                    f"'{extra}'")
        # the role's defaults: allowed exactly when it holds them all
        defaults = api(gateway, "POST", "/v1/api-keys", {"name": "defaults", "role": target_role}, caller["key"])
        lacking = [s for s in DEFAULT_SCOPES[target_role] if s not in scopes]
        if lacking:
            refused(defaults, "missing_scope", "scopes", f"'{lacking[0]}'")
        else:
            assert defaults.status == 201 and defaults.json()["scopes"] == list(DEFAULT_SCOPES[target_role])
            made.add(defaults.json()["id"])
    # rotating a wider key (a full admin holds every scope) would hand its secret over: refused
    rotate = api(gateway, "POST", f"/v1/api-keys/{full_admin['id']}/rotate", key=caller["key"])
    # and so is revoking one, whose holder it could not make again
    revoke = api(gateway, "DELETE", f"/v1/api-keys/{full_admin['id']}", key=caller["key"])
    refused(rotate, "missing_scope", "key_id", f"'{next(s for s in ALL if s not in scopes)}'")
    refused(revoke, "missing_scope", "key_id", f"'{next(s for s in ALL if s not in scopes)}'")
    assert key_ids(gateway, workspace) == made
    # a key within its own role and scopes it may revoke, and itself always
    child = create_key(gateway, "member", workspace, caller["key"], scopes=scopes[:1])
    for gone in (child, caller):
        assert api(gateway, "DELETE", f"/v1/api-keys/{gone['id']}", key=caller["key"]).status == 200
        made.discard(gone["id"])
    assert key_ids(gateway, workspace) == made


def test_a_full_admin_rotates_and_revokes_a_full_admin(gateway):
    caller = create_key(gateway, "admin")
    other = create_key(gateway, "admin", caller["workspace_id"])
    rotated = api(gateway, "POST", f"/v1/api-keys/{other['id']}/rotate", key=caller["key"])
    assert rotated.status == 200 and rotated.json()["scopes"] == list(ALL), rotated.text
    assert api(gateway, "DELETE", f"/v1/api-keys/{other['id']}", key=caller["key"]).status == 200
    assert key_ids(gateway, caller["workspace_id"]) == {caller["id"]}


def test_a_key_without_keys_write_still_revokes_itself(gateway, mock):
    narrow = create_key(gateway, "admin", scopes=["models.read"])
    assert api(gateway, "GET", f"/v1/api-keys/{narrow['id']}", key=narrow["key"]).status == 403  # no keys.read
    assert api(gateway, "DELETE", f"/v1/api-keys/{narrow['id']}", key=narrow["key"]).status == 200
    assert api(gateway, "GET", "/v1/models", key=narrow["key"]).status == 401  # revoked


def test_the_narrowed_admin_cannot_revoke_wider_keys_but_may_revoke_itself(gateway, mock):
    narrow = create_key(gateway, "admin", scopes=["models.read", "keys.read", "keys.write"])
    workspace = narrow["workspace_id"]
    full_admin = create_key(gateway, "admin", workspace)
    member = create_key(gateway, "member", workspace)  # the member defaults: inference first
    for target in (full_admin, member):
        refused(api(gateway, "DELETE", f"/v1/api-keys/{target['id']}", key=narrow["key"]), "missing_scope",
                "key_id", "'inference'")
        assert chat(gateway, target["key"], mock.scenario()).status == 200  # still in service
    assert api(gateway, "GET", f"/v1/api-keys/{full_admin['id']}", key=narrow["key"]).status == 200
    narrower = create_key(gateway, "member", workspace, narrow["key"], scopes=["models.read"])
    assert api(gateway, "DELETE", f"/v1/api-keys/{narrower['id']}", key=narrow["key"]).status == 200
    assert api(gateway, "DELETE", f"/v1/api-keys/{narrow['id']}", key=narrow["key"]).status == 200
    assert key_ids(gateway, workspace) == {full_admin["id"], member["id"]}


def test_a_key_creates_keys_only_in_its_own_workspace_and_root_anywhere(gateway):
    for scopes in (["models.read", "keys.write"], list(ALL)):
        caller = create_key(gateway, "admin", scopes=scopes)
        other = new_workspace()
        for where in ({"workspace_id": other}, {}):
            query = f"?workspace_id={other}" if not where else ""
            resp = api(gateway, "POST", f"/v1/api-keys{query}", {"name": "x", "role": "member", "scopes": [],
                                                                  **where}, caller["key"])
            assert resp.status == 404 and resp.json()["error"]["param"] == "workspace_id", resp.text
        assert api(gateway, "GET", f"/v1/api-keys?workspace_id={other}").json()["total"] == 0
    made = api(gateway, "POST", "/v1/api-keys", {"name": "r", "role": "admin", "workspace_id": new_workspace()},
               ADMIN_KEY)
    assert made.status == 201 and made.json()["scopes"] == list(ALL)


def test_only_a_root_key_rotates_or_revokes_a_root_key(mock):
    data_dir = tempfile.mkdtemp(prefix="gw-grants-")

    async def store_root() -> str:
        store = SQLiteStateStore(str(Path(data_dir) / "state.db"), str(Path(data_dir) / "cache.db"))
        await store.start()
        try:
            record, _ = await ApiKeys(store).create(name="recovery", role="admin", root=True)
            return record.id
        finally:
            await store.close()

    Path(data_dir).mkdir(parents=True, exist_ok=True)
    root_id = asyncio.run(store_root())
    server = start_in_process(data_dir=data_dir)
    try:
        full_admin = create_key(server, "admin", "default")
        assert not full_admin["root"]
        refused(api(server, "POST", f"/v1/api-keys/{root_id}/rotate", key=full_admin["key"]), "missing_role",
                "key_id", "root key")
        refused(api(server, "DELETE", f"/v1/api-keys/{root_id}", key=full_admin["key"]), "missing_role",
                "key_id", "root key")
        rotated = api(server, "POST", f"/v1/api-keys/{root_id}/rotate", key=ADMIN_KEY)
        assert rotated.status == 200 and rotated.json()["root"] is True
        # the rotated root key may itself rotate and create anything
        assert api(server, "POST", f"/v1/api-keys/{full_admin['id']}/rotate", key=rotated.json()["key"]).status == 200
        # and the root key revokes a root key (itself included)
        assert api(server, "DELETE", f"/v1/api-keys/{root_id}", key=rotated.json()["key"]).status == 200
        assert root_id not in key_ids(server, "default")
    finally:
        server.stop()
