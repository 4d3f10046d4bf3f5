"""Helpers for policy tests: create policies, send chat requests that carry metadata, fire requests concurrently."""

from __future__ import annotations

import concurrent.futures
import time
import uuid

import msgspec

from tests.support.http import Response, post, request
from tests.support.servers import ADMIN_KEY

ADMIN = {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"}
USAGE = "/v1/policies/usage-limits"
RATE = "/v1/policies/rate-limits"


def tag() -> str:
    """A value no other test uses: policies conditioned on it touch this test's requests only."""
    return uuid.uuid4().hex[:12]


def create(gateway, path: str, body: dict, headers: dict | None = None) -> str:
    resp = post(gateway.url + path, body, headers or ADMIN)
    assert resp.status == 200, resp.text
    assert resp.json()["object"] == "policy_usage_limits"
    return resp.json()["id"]


def rate_limit(gateway, run: str, value: int, unit: str = "rpd", type: str = "requests",
               group_by: str = "metadata.run") -> str:
    return create(gateway, RATE, {"name": f"rate {run}", "conditions": [{"key": "metadata.run", "value": run}],
                                  "group_by": [{"key": group_by}], "type": type, "unit": unit, "value": value})


def usage_limit(gateway, run: str, type: str, credit_limit: float, **extra) -> str:
    body = {"name": f"usage {run}", "conditions": [{"key": "metadata.run", "value": run}],
            "group_by": [{"key": "metadata.run"}], "type": type, "credit_limit": credit_limit, **extra}
    return create(gateway, USAGE, body)


def get(gateway, path: str, policy_id: str) -> dict:
    resp = request("GET", f"{gateway.url}{path}/{policy_id}", headers=ADMIN)
    assert resp.status == 200, resp.text
    return resp.json()


def chat_headers(base: str, run: str, **metadata: str) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
            "authorization": "Bearer sk-test", "content-type": "application/json",
            "x-gateway-metadata": msgspec.json.encode({"run": run, **metadata}).decode()}


def chat(url: str, headers: dict[str, str], model: str = "gpt-4o-mini", **body) -> Response:
    doc = {"model": model, "messages": [{"role": "user", "content": "hi"}], **body}
    return post(url + "/v1/chat/completions", doc, headers)


def concurrently(urls: list[str], headers: dict[str, str], n: int, **body) -> list[Response]:
    """``n`` chat requests at once, spread over ``urls``, each on a fresh connection."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(chat, urls[i % len(urls)], headers, **body) for i in range(n)]
        return [f.result(timeout=120) for f in futures]


def statuses(responses: list[Response]) -> dict[int, int]:
    out: dict[int, int] = {}
    for resp in responses:
        out[resp.status] = out.get(resp.status, 0) + 1
    return out


def same_day(run) -> object:
    """Run ``run()`` so that it starts and ends in one UTC day (rpd windows); retried once across midnight."""
    for _ in range(2):
        day = time.time() // 86400
        result = run()
        if time.time() // 86400 == day:
            return result
    raise AssertionError("crossed UTC midnight twice")
