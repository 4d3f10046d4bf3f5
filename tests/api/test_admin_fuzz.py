"""A seeded fuzz of every route in the gateway's route table, through the real gateway with the admin key.

Each route gets ``PER_ROUTE`` requests made from a seed of its own (a failure names the route and the case, and
rerunning repeats it): random bodies (wrong types, huge and out-of-range numbers, deep nesting, unknown keys, invalid
UTF-8 raw and inside strings, lone surrogates, empty), random path parameters (ids of real records among them, so
updates of existing records are fuzzed too) and random query strings. Whatever is sent, the answer is never a 5xx,
and every error is the one JSON error format with a message.
"""

from __future__ import annotations

import http.client
import random
import re
import tempfile
import zlib
from typing import Any
from urllib.parse import quote

import msgspec
import pytest

from gateway.app import GatewayApp
from gateway.runtime import Runtime
from gateway.settings import load
from tests.support.agent_cards import CardServer, card_v1
from tests.support.http import request
from tests.support.servers import ADMIN_KEY, start_gateway

PER_ROUTE = 30
SEED = 20261126
ADMIN = {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"}

#: field names the routes' bodies use (so random objects reach the validation past the unknown-field check)
FIELDS = ["name", "config", "conditions", "group_by", "key", "value", "excludes", "type", "credit_limit",
          "alert_threshold", "periodic_reset", "periodic_reset_days", "unit", "status", "workspace_id",
          "organisation_id", "role", "scopes", "expires_at", "slug", "provider", "api_key", "custom_host",
          "model", "messages", "role", "content", "variables", "template", "checks", "id", "parameters", "deny",
          "async", "on_fail", "on_success", "input_file_id", "endpoint", "completion_window", "metadata",
          "training_file", "purpose", "strategy", "targets", "mode", "retry", "attempts", "cache", "max_tokens",
          "temperature", "n", "stream", "input", "query", "documents", "prompt", "description", "version",
          "hyperparameters", "tools", "timeout", "user_api_key_rotation_period", "text", "stage", "response",
          "guardrail", "choices"]
#: query names the routes read
QUERY = ["page_size", "current_page", "limit", "after", "before", "order", "workspace_id", "status", "type",
         "unit", "purpose", "window", "group_by", "since", "until", "trace_id", "model", "provider", "version",
         "metadata", "q"]
EVERY = {"conditions": [{"key": "metadata.fuzz", "value": "never"}], "group_by": [{"key": "model"}]}
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
#: a valid body per route (a route's own, or its collection's): mutated, it reaches the rules past decoding
TEMPLATES: dict[str, dict] = {
    "/v1/policies/usage-limits": {**EVERY, "type": "cost", "credit_limit": 10, "alert_threshold": 5,
                                  "periodic_reset_days": 7},
    "/v1/policies/rate-limits": {**EVERY, "type": "requests", "unit": "rpm", "value": 1},
    "/v1/configs": {"name": "fuzz", "config": {"provider": "vendorA", "api_key": "sk-x"}},
    "/v1/configs/validate": {"strategy": {"mode": "fallback"}, "targets": [
        {"provider": "vendorA", "api_key": "sk-x", "retry": {"attempts": 2}}, {"provider": "vendorA", "api_key": "y"}]},
    "/v1/prompts": {"name": "fuzz", "model": "m", "provider": "@fuzz-slug", "temperature": 0.5,
                    "messages": [{"role": "user", "content": "hi {{x}}"}]},
    "/v1/prompts/{prompt_id}/render": {"variables": {"x": "y"}, "max_tokens": 5},
    "/v1/prompts/{prompt_id}/completions": {"variables": {"x": "y"}, "max_tokens": 5},
    "/v1/providers": {"slug": "fuzz-other", "provider": "vendorA", "api_key": "sk-x"},
    "/v1/guardrails": {"name": "fuzz", "checks": [{"id": "default.wordCount", "parameters": {"maxWords": 3}}]},
    "/v1/guardrails/check": {"guardrail": {"checks": [{"id": "default.pii", "parameters": {"redact": True}}],
                                           "deny": True}, "stage": "input", "text": "mail a@b.example"},
    "/v1/guardrails/{guardrail_id}/check": {
        "stage": "output", "model": "m", "messages": [{"role": "user", "content": "hi"}],
        "response": {"choices": [{"message": {"content": "four words right here"}}]}},
    "/v1/api-keys": {"name": "fuzz", "role": "member", "scopes": ["inference"]},
    "/v1/batches": {"input_file_id": "file-gw-" + "0" * 32, "endpoint": "/v1/chat/completions",
                    "completion_window": "24h"},
    "/v1/fine_tuning/jobs": {"model": "gpt-4o-mini", "training_file": "file-x"},
    "/v1/chat/completions": CHAT,
    "/v1/completions": {"model": "m", "prompt": "hi", "max_tokens": 5},
    "/v1/embeddings": {"model": "m", "input": ["a", "b"]},
    "/v1/moderations": {"input": "hi"},
    "/v1/rerank": {"model": "m", "query": "q", "documents": ["a"], "top_n": 1},
}
HUGE = [10**30, -(10**30), 2**63, -(2**63) - 1, 2**64, 1e308, -1e308, 1.7976931348623157e308, 5e-324]


def _scalar(rng: random.Random) -> Any:
    return rng.choice([
        None, True, False, 0, -1, 1, rng.randint(-10**6, 10**6), rng.choice(HUGE), rng.random() * 1e6, "",
        "x" * rng.choice([1, 255, 256, 5000, 70_000]), "*", "default", "vendorA", "@nope", "gpt-4o-mini",
        "metadata.x", "{{x}}", "{{#a}}", "\u0000", "\u00e9\u4e2d\U0001f600", "../../etc", "requests", "cost",
        "tokens", "rpm", "active", "archived", "admin", "member", "http://127.0.0.1:1/v1", "2026-01-01",
    ])


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return _scalar(rng)
    if roll < 0.75:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(FIELDS): _value(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def _nested(rng: random.Random, depth: int) -> bytes:
    """``depth`` nested arrays or objects (written as text: encoders refuse to go that deep)."""
    if rng.random() < 0.5:
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"targets": ' * depth + b"1" + b"}" * depth


def _paths(doc: Any, at: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) inside ``doc``, containers included."""
    found = [at]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found.extend(_paths(value, (*at, key)))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found.extend(_paths(value, (*at, index)))
    return found


def mutated(rng: random.Random, template: dict) -> dict:
    """``template`` with one to three values replaced, dropped or added (copied: the template stays)."""
    doc = msgspec.json.decode(msgspec.json.encode(template))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(doc)[1:] or [("name",)])
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        roll = rng.random()
        if roll < 0.15 and isinstance(parent, dict):
            parent.pop(last, None)
        elif roll < 0.3 and isinstance(parent, dict):
            parent[rng.choice(FIELDS)] = _value(rng)
        else:
            parent[last] = rng.choice([_value(rng), rng.choice(HUGE), _scalar(rng)])
    return doc


def huge_numbers(template: dict | None) -> list[bytes]:
    """The template with each of its numbers replaced by each huge number, one at a time (every route's number
    fields get every extreme, not only the ones the dice pick)."""
    if template is None:
        return []
    bodies = []
    for path in _paths(template)[1:]:
        value: Any = template
        for step in path:
            value = value[step]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        for huge in HUGE:
            doc = msgspec.json.decode(msgspec.json.encode(template))
            parent = doc
            for step in path[:-1]:
                parent = parent[step]
            parent[path[-1]] = huge
            bodies.append(msgspec.json.encode(doc))
    return bodies


def random_body(rng: random.Random, template: dict | None) -> bytes:
    """One random request body (bytes); half of them mutations of the route's ``template`` when it has one."""
    if template is not None and rng.random() < 0.5:
        return msgspec.json.encode(mutated(rng, template))
    kind = rng.randrange(12)
    if kind == 0:
        return b""
    if kind == 1:  # invalid UTF-8: raw, inside a string, in a key
        return rng.choice([b"\xff\xfe", b'{"name": "\xff"}', b'{"\xc3\x28": 1}', b'{"name": "ok", "x": "\xed\xa0\x80"}',
                           b'{"config": {"provider": "vendorA\x80"}}'])
    if kind == 2:  # not JSON, or JSON that no object type accepts
        return rng.choice([b"not json", b"{", b"[]", b"null", b"1", b'"text"', b"{}}", b"\x00", b"1e400",
                           b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e400}', b'{"a": -1e400}'])
    if kind == 3:  # lone surrogates, escaped (valid JSON text, not a valid string)
        field = rng.choice(FIELDS)
        return ('{"%s": "\\ud800", "name": "\\udfff x"}' % field).encode()
    if kind == 4:  # deep nesting
        depth = rng.choice([64, 200, 1000, 5000])
        return b'{"%s": ' % rng.choice(FIELDS).encode() + _nested(rng, depth) + b"}"
    if kind == 5:  # huge numbers where numbers are meant
        return msgspec.json.encode({f: rng.choice(HUGE) for f in rng.sample(FIELDS, rng.randint(1, 6))})
    return msgspec.json.encode({rng.choice(FIELDS): _value(rng) for _ in range(rng.randint(0, 8))})


def random_segment(rng: random.Random, real: list[str]) -> str:
    """One path parameter (already percent-encoded for the request line)."""
    raw = rng.choice([
        *(real or ["none"]), "x", "0", "-1", str(10**30), "a" * 300, "%FF%FE", "%00", "%C3%28", "..", "%2e%2e",
        "%2F", "@slug", "file-gw-" + "0" * 32, "batch_gw_x", "\u00e9", "{{x}}", "%ED%A0%80", "a b",
    ])
    return quote(raw, safe="%@-_.~") if "%" not in raw else raw


def random_query(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return ""
    values = ["", "-1", "0", "1", str(10**30), "1e308", "x", "%FF", "%00", "active", "asc", "cost", "rpm",
              "default", "a" * 3000, "%ED%A0%80", "[1]", "{}", "true"]
    pairs = [f"{rng.choice(QUERY)}={rng.choice(values)}" for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.2:
        pairs.append(rng.choice(["=", "&&", "%", "page_size", "a=%zz"]))
    return "?" + "&".join(pairs)


def route_table() -> list[tuple[str, str]]:
    """The (method, path) of every route, from the gateway's own table (the console mounted, as by default)."""
    settings = load({"GATEWAY_DATA_DIR": tempfile.mkdtemp(prefix="gw-fuzz-routes-"), "GATEWAY_ADMIN_KEY": "x"})
    return sorted(GatewayApp(Runtime(settings)).routes.routes())


ROUTES = route_table()


def _send(url: str, method: str, path: str, body: bytes, extra: dict[str, str]) -> tuple[int, str, bytes]:
    """(status, content type, body); a stream answer is judged by its status and headers only."""
    host, port = url.rsplit("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {**ADMIN, **extra}
        if body or method in ("POST", "PUT"):
            headers["content-length"] = str(len(body))
        conn.request(method, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        kind = resp.getheader("content-type", "")
        data = b"" if kind.startswith("text/event-stream") else resp.read()
        return resp.status, kind, data
    finally:
        conn.close()


def _created(server, path: str, body: dict) -> str:
    resp = request("POST", server.url + path, body, ADMIN)
    assert resp.status in (200, 201), (path, resp.text)
    doc = resp.json()
    return doc.get("slug") or doc["id"]


@pytest.fixture(scope="module")
def fuzzed():
    """A gateway of its own (records the fuzz creates stay out of other tests) and ids of real records."""
    server = start_gateway()
    every = {"conditions": [{"key": "metadata.fuzz", "value": "never"}], "group_by": [{"key": "model"}]}
    real = [
        _created(server, "/v1/policies/usage-limits", {**every, "type": "tokens", "credit_limit": 10}),
        _created(server, "/v1/policies/rate-limits", {**every, "type": "requests", "unit": "rpm", "value": 1}),
        _created(server, "/v1/configs", {"name": "fuzz", "config": {"provider": "vendorA", "api_key": "sk-x"}}),
        _created(server, "/v1/providers", {"slug": "fuzz-slug", "provider": "vendorA", "api_key": "sk-x"}),
        _created(server, "/v1/prompts", {"name": "fuzz", "model": "m", "provider": "@fuzz-slug",
                                         "messages": [{"role": "user", "content": "hi {{x}}"}]}),
        _created(server, "/v1/guardrails", {"name": "fuzz", "checks": [
            {"id": "default.wordCount", "parameters": {"maxWords": 3}}]}),
        _created(server, "/v1/api-keys", {"name": "fuzz", "role": "member"}),
    ]
    agent = CardServer().start()  # a registered agent, so its update and refresh are fuzzed too
    agent.answer(card_v1(f"{agent.url}/rpc"))
    real.append(_created(server, "/v1/agents", {"slug": "fuzz-agent", "url": agent.url}))
    yield server, real
    server.stop()
    agent.stop()


def _check(server, where: str, sent: bytes, status: int, kind: str, data: bytes) -> None:
    if status >= 500:
        log = server.output()
        raise AssertionError(f"{where} (body {sent[:200]!r}): {status} {data[:300]!r}\n"
                             f"server log: {log[log.rfind('Traceback'):][-2000:]}")
    if status < 400:
        return
    assert kind.startswith("application/json"), f"{where}: {status} answered {kind!r}"
    doc = msgspec.json.decode(data)
    error = doc["error"]
    assert isinstance(error["message"], str) and error["message"], f"{where}: {doc}"
    if " /v1/messages" in where:  # the Messages API answers in anthropic's error shape, so its SDK raises its errors
        assert doc["type"] == "error" and isinstance(error["type"], str), f"{where}: {doc}"
        return
    # an agent's JSON-RPC endpoint is POST /v1/agents/<slug> (a slug that is "/" reaches the admin create instead)
    agent_rpc = re.match(r"POST /v1/agents/[^/?# ]+[ ?]", where) is not None and "jsonrpc" in doc
    if (" /v1/mcp" in where and "/v1/mcp-servers" not in where) or agent_rpc:  # JSON-RPC errors, as clients read them
        assert doc["jsonrpc"] == "2.0" and isinstance(error["code"], int), f"{where}: {doc}"
        return
    assert isinstance(error["type"], str) and "param" in error and "code" in error, f"{where}: {doc}"


@pytest.mark.parametrize("method,route", ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_no_input_makes_a_route_answer_5xx(fuzzed, mock, method, route):
    server, real = fuzzed
    #: half the requests name a provider (the mock), so inference and provider routes check their bodies too
    upstream = {"x-gateway-provider": "vendorA", "x-gateway-custom-host": mock.scenario([{}]) + "/v1",
                "authorization": "Bearer sk-test"}
    rng = random.Random(SEED ^ zlib.crc32(f"{method} {route}".encode()))
    template = TEMPLATES.get(route) or TEMPLATES.get(route.rsplit("/", 1)[0])
    extremes = huge_numbers(template) if method in ("POST", "PUT") else []
    for case in range(PER_ROUTE + len(extremes)):
        path = "/".join(random_segment(rng, real) if part.startswith("{") else part for part in route.split("/"))
        if case >= PER_ROUTE:
            body = extremes[case - PER_ROUTE]
        else:
            body = random_body(rng, template) if method in ("POST", "PUT") or rng.random() < 0.1 else b""
        target = path + random_query(rng)
        status, kind, data = _send(server.url, method, target, body, upstream if rng.random() < 0.5 else {})
        _check(server, f"{method} {target[:200]} (case {case})", body, status, kind, data)
