"""Every mounted route authenticates the one way (gateway.controlplane.auth): the walk reads the app's own route table,
so a route added later is walked too, and sends each route no key, a malformed key, a revoked key (as
``x-gateway-api-key`` and as the bearer), a key without the route's scope and another workspace's key. Each answer
is a 401 or 403 (another workspace's records: the 404 of a missing one) in the one error format, never a 2xx or a
500; and nothing of the other workspace changes."""

from __future__ import annotations

import re
from typing import Any

from gateway.controlplane.auth import MISSING, UNKNOWN
from gateway.controlplane.keys import SCOPES
from tests.support.agent_cards import CardServer, card_v1
from tests.support.asgi import call, in_process
from tests.support.servers import ADMIN_KEY

#: the routes that need no key: liveness, readiness, and the console page with its static files (the page holds
#: no data; every call it makes sends the operator's key). Any other route must authenticate.
PUBLIC = {("GET", "/health"), ("GET", "/ready")}
RULE = {"name": "short", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 50}}], "deny": True}
TEMPLATE = {"name": "greeter", "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello {{name}}!"}]}
USAGE = {"name": "cost", "conditions": [{"key": "workspace_id", "value": "*"}], "group_by": [{"key": "api_key"}],
         "type": "cost", "credit_limit": 1000}
RATE = {"name": "rpm", "conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}],
        "type": "requests", "unit": "rpm", "value": 1_000_000}
HOST = "http://127.0.0.1:9/v1"  # never called: no request of this test gets past authentication to a provider
#: ids no workspace holds, for the path parameters of records this test does not make
PLACEHOLDERS = {"file_id": "file-gw-nosuch", "batch_id": "batch_gw_nosuch", "fine_tuning_job_id": "ftjob-nosuch",
                "response_id": "resp_nosuch", "version": "1"}
WORKSPACE_A, WORKSPACE_B = "walk-a", "walk-b"


def is_public(method: str, path: str) -> bool:
    return (method, path) in PUBLIC or path == "/console" or path.startswith("/console/")


def refused(resp: Any, statuses: tuple[int, ...], where: str) -> dict:
    """The answer's error, after checking its status and the one error format (the anthropic-style door answers
    in its own dialect's envelope, docs/front-doors.md: ``{"type": "error", "error": {"type", "message"}}``)."""
    assert resp.status in statuses, f"{where}: {resp.status} {resp.body[:300]!r}"
    doc = resp.json()
    if " /v1/messages" in where:
        assert doc["type"] == "error" and set(doc["error"]) >= {"message", "type"}, (where, doc)
        return {"param": "x-gateway-api-key", "code": None, **doc["error"]}
    # JSON-RPC errors, the gateway's fields in data (docs/mcp.md, docs/agents.md)
    if re.search(r" /v1/mcp(/{slug})? ", where) or where.startswith("POST /v1/agents/{slug} "):
        assert doc["jsonrpc"] == "2.0" and set(doc["error"]) >= {"code", "message"}, (where, doc)
        return {"message": doc["error"]["message"], "param": None, "code": None, **doc["error"].get("data", {})}
    assert set(doc["error"]) >= {"message", "type", "param", "code"}, (where, doc)
    return dict(doc["error"])


async def admin(app: Any, method: str, path: str, body: dict | None = None, key: str = ADMIN_KEY) -> dict:
    resp = await call(app, method, path, body or b"", {"x-gateway-api-key": key, "content-type": "application/json"})
    assert resp.status in (200, 201), f"{method} {path}: {resp.status} {resp.text}"
    return dict(resp.json())


async def new_key(app: Any, workspace: str, role: str = "admin", scopes: list[str] | None = None) -> dict:
    body: dict[str, Any] = {"name": "walk", "role": role, "workspace_id": workspace}
    if scopes is not None:
        body["scopes"] = scopes
    return await admin(app, "POST", "/v1/api-keys", body)


async def records_of(app: Any, workspace: str, agent_url: str) -> dict[str, str]:
    """One record of each kind the admin routes manage, in ``workspace``: path parameter -> id (the agent, whose
    card ``agent_url`` serves, shares the provider slug's name: both routes' parameter is ``slug``)."""
    made = {"workspace_id": workspace}
    ids = {"key_id": (await new_key(app, workspace, "member"))["id"]}
    slug = {"slug": "walk", "provider": "vendorA", "api_key": "sk-walk", "custom_host": HOST, **made}
    ids["slug"] = (await admin(app, "POST", "/v1/providers", slug))["slug"]
    config = {"name": "walk", "config": {"provider": "vendorA", "api_key": "sk-walk", "custom_host": HOST}, **made}
    ids["config_id"] = (await admin(app, "POST", "/v1/configs", config))["id"]
    ids["prompt_id"] = (await admin(app, "POST", "/v1/prompts", {**TEMPLATE, **made}))["id"]
    ids["guardrail_id"] = (await admin(app, "POST", "/v1/guardrails", {**RULE, **made}))["id"]
    ids["usage-limits"] = (await admin(app, "POST", "/v1/policies/usage-limits", {**USAGE, **made}))["id"]
    ids["rate-limits"] = (await admin(app, "POST", "/v1/policies/rate-limits", {**RATE, **made}))["id"]
    await admin(app, "POST", "/v1/agents", {"slug": ids["slug"], "url": agent_url, **made})
    return ids


def concrete(path: str, ids: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "policy_id":
            return ids["usage-limits" if "/usage-limits/" in path else "rate-limits"]
        return ids.get(name) or PLACEHOLDERS[name]

    return re.sub(r"\{(\w+)\}", value, path)


async def still_there(app: Any, ids: dict[str, str], workspace: str) -> None:
    query = f"?workspace_id={workspace}"
    for path in (f"/v1/api-keys/{ids['key_id']}", f"/v1/providers/{ids['slug']}", f"/v1/configs/{ids['config_id']}",
                 f"/v1/prompts/{ids['prompt_id']}", f"/v1/guardrails/{ids['guardrail_id']}",
                 f"/v1/policies/usage-limits/{ids['usage-limits']}", f"/v1/policies/rate-limits/{ids['rate-limits']}",
                 f"/v1/agents/{ids['slug']}"):
        record = await admin(app, "GET", path + query)
        assert record.get("status") != "archived", record


async def test_every_mounted_route_refuses_each_wrong_credential_in_the_one_error_format():
    agent = CardServer().start()
    agent.answer(card_v1(f"{agent.url}/rpc"))
    try:
        await walk_every_route(agent.url)
    finally:
        agent.stop()


async def walk_every_route(agent_url: str) -> None:
    async with in_process({"GATEWAY_LOG_FILE": "off"}) as app:
        routes = [route for route in app.routes.routes() if not is_public(*route)]
        walked = {path for _, path in routes}
        # the table was read whole: inference, front doors, data, logs, admin, console API and metrics routes
        assert {"/v1/chat/completions", "/v1/messages", "/v1/files", "/v1/logs", "/v1/providers", "/v1/logs/stream",
                "/v1/configs/validate", "/metrics"} <= walked, walked
        ids = await records_of(app, WORKSPACE_A, agent_url)
        revoked = await new_key(app, WORKSPACE_A)
        await admin(app, "DELETE", f"/v1/api-keys/{revoked['id']}?workspace_id={WORKSPACE_A}")
        scopeless = await new_key(app, WORKSPACE_A, scopes=[])
        other = await new_key(app, WORKSPACE_B)
        all_but: dict[str, str] = {}  # scope -> a key of workspace A holding every scope but that one
        for method, path in routes:
            await walk_one(app, method, path, ids, revoked["key"], scopeless["key"], other["key"], all_but)
        await still_there(app, ids, WORKSPACE_A)
        assert {"inference", "keys.write", "providers.read", "logs.read", "prompts.run", "guardrails.invoke",
                "agents.write"} <= set(all_but)


async def walk_one(app: Any, method: str, path: str, ids: dict[str, str], revoked: str, scopeless: str,
                   other: str, all_but: dict[str, str]) -> None:
    url = concrete(path, ids)
    where = f"{method} {path}"

    async def send(headers: dict[str, str], url: str = url, body: bytes | dict = b"{}") -> Any:
        return await call(app, method, url, body, {"content-type": "application/json", **headers})

    error = refused(await send({}), (401,), f"{where} without a key")
    assert error["message"] == MISSING and error["param"] == "x-gateway-api-key", (where, error)
    for label, headers in (("a malformed key", {"x-gateway-api-key": "gw-\u00ff not a key"}),
                           ("a malformed bearer", {"authorization": "Bearer gw-\u00ff not a key"}),
                           ("a revoked key", {"x-gateway-api-key": revoked}),
                           ("a revoked bearer", {"authorization": f"Bearer {revoked}"})):
        error = refused(await send(headers), (401,), f"{where} with {label}")
        assert error["message"] == UNKNOWN and error["type"] == "authentication_error", (where, label, error)
    error = refused(await send({"x-gateway-api-key": scopeless}), (403,), f"{where} with a key without scopes")
    named = re.search(r"lacks the scope '([\w.-]+)'", error["message"])
    if named:  # the route names its scope: a key holding every other one lacks it too
        scope = named.group(1)
        if scope not in all_but:
            all_but[scope] = (await new_key(app, WORKSPACE_A, scopes=[s for s in SCOPES if s != scope]))["key"]
        again = refused(await send({"x-gateway-api-key": all_but[scope]}), (403,), f"{where} without {scope}")
        assert f"lacks the scope '{scope}'" in again["message"], (where, again)
    else:  # /metrics: no workspace's key reads every workspace's series
        assert error["code"] == "missing_role" and "root" in error["message"], (where, error)
    # another workspace's key: workspace A's records are as missing to it, and naming A is refused
    if "{" in path:  # a record of workspace A is the 404 of a missing one (ids no workspace holds: 404 or 400)
        holds_a = not any(name in PLACEHOLDERS for name in re.findall(r"\{(\w+)\}", path))
        refused(await send({"x-gateway-api-key": other}), (404,) if holds_a else (400, 404),
                f"{where} with another workspace's key")
    elif method == "GET":
        named = f"{url}?workspace_id={WORKSPACE_A}"
        refused(await send({"x-gateway-api-key": other}, named), (400, 403, 404), f"{where} naming workspace A")
    else:
        resp = await send({"x-gateway-api-key": other}, f"{url}?workspace_id={WORKSPACE_A}",
                          {"workspace_id": WORKSPACE_A})
        refused(resp, (400, 403, 404, 415), f"{where} naming workspace A")
