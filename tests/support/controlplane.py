"""Control-plane helpers for tests: admin API calls and a fresh workspace (with its own admin key) per test."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.http import Response, request
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def api(server: Any, method: str, path: str, body: Any = None, key: str = ADMIN_KEY, **headers: str) -> Response:
    """A control-plane call with ``key`` as ``x-gateway-api-key`` (JSON body when given)."""
    all_headers = {"x-gateway-api-key": key, **headers}
    if body is not None:
        all_headers["content-type"] = "application/json"
    return request(method, f"{server.url}{path}", body, all_headers)


def new_workspace() -> str:
    return f"ws-{uuid.uuid4().hex[:10]}"


def create_key(server: Any, role: str = "admin", workspace: str | None = None, key: str = ADMIN_KEY,
               **fields: Any) -> dict:
    """A new key (the record with its ``key``) in ``workspace`` (a fresh one by default), made by ``key``."""
    body = {"name": f"test {role}", "role": role, "workspace_id": workspace or new_workspace(), **fields}
    resp = api(server, "POST", "/v1/api-keys", body, key)
    assert resp.status == 201, resp.text
    return resp.json()


def created(server: Any, path: str, key: str, **body: Any) -> dict[str, Any]:
    """``POST path`` with ``body`` (201 expected): the record as answered."""
    resp = api(server, "POST", path, body, key)
    assert resp.status == 201, resp.text
    return dict(resp.json())


def error_of(resp: Response, status: int, param: str | None = None) -> dict[str, Any]:
    """The error of an answer that must be ``status`` (naming ``param``, when given)."""
    assert resp.status == status, resp.text
    error = dict(resp.json()["error"])
    if param is not None:
        assert error["param"] == param, error
    return error


class Tenant:
    """A workspace of a test's own with its admin key (``key``): its control-plane calls (``admin``), new member
    keys, and ``register`` of a record named by a slug in the collection ``records`` (``/v1/mcp-servers``)."""

    records = ""

    def __init__(self, gw: Any) -> None:
        self.gw = gw
        record = create_key(gw, role="admin")
        self.workspace: str = record["workspace_id"]
        self.key: str = record["key"]

    def register(self, slug: str, url: str, **fields: Any) -> dict[str, Any]:
        """``POST`` to ``records`` (201 expected): the record as answered."""
        answer = api(self.gw, "POST", self.records, {"slug": slug, "url": url, **fields}, self.key)
        assert answer.status == 201, answer.text
        return answer.json()

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        return api(self.gw, method, path, body, self.key)

    def member_key(self, **fields: Any) -> dict[str, Any]:
        """A new member key of the workspace (the record with its ``key``)."""
        return create_key(self.gw, role="member", workspace=self.workspace, key=self.key, **fields)


def chat(server: Any, key: str, base: str | None = None, body: dict | None = None, **headers: str) -> Response:
    """A chat request with gateway key ``key``; with ``base``, routed to that mock base as vendorA."""
    all_headers = {"x-gateway-api-key": key, "content-type": "application/json", **headers}
    if base is not None:
        all_headers.update({"x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
                            "authorization": "Bearer sk-test"})
    return request("POST", f"{server.url}/v1/chat/completions", body or CHAT, all_headers)


def clear_redis_prefix(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (never the whole database: other tests share it)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


