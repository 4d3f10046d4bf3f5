"""The app at the edge: trailing slashes, unknown routes and wrong methods; a module of the package that fails to
import stops the server with its traceback, instead of a route that answers 404 or a provider that answers 400 later
(a provider loaded on first use answers 500 naming it); an idle worker holds none of what is loaded on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.http import post, request
from tests.support.servers import ADMIN_KEY, free_port, start_gateway

ROOT = Path(__file__).resolve().parents[1]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_a_trailing_slash_is_served_as_the_route_without_it(gateway, mock, gw_headers):
    base = mock.scenario()
    for path in ("/v1/chat/completions/", "/v1/chat/completions//"):
        resp = post(gateway.url + path, CHAT, gw_headers(base + "/v1"))
        assert resp.status == 200, resp.text
        assert resp.json()["object"] == "chat.completion"
    assert mock.calls(base)["calls"] == 2
    resp = request("GET", f"{gateway.url}/health/")
    assert resp.status == 200 and resp.json()["status"] == "ok"


def test_a_wrong_method_on_a_slashed_path_names_only_the_allowed_methods(gateway):
    resp = request("GET", f"{gateway.url}/v1/chat/completions/", headers={"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 405
    assert resp.headers["allow"] == "POST"
    message = resp.json()["error"]["message"]
    assert message.startswith("GET is not allowed") and "allowed: POST" in message


def test_an_unknown_path_with_a_slash_is_404(gateway):
    resp = post(f"{gateway.url}/v1/chat/nothing/", CHAT, {"x-gateway-api-key": ADMIN_KEY})
    assert resp.status == 404


BLOCKER = '''
import sys

class _Broken:
    """Makes one module of the package fail to import, in every process (Granian's workers too)."""

    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise ImportError("simulated failure importing " + name)
        return None

sys.meta_path.insert(0, _Broken())
'''


def blocked_env(tmp_path: Path, module: str) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(module=module))
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "GATEWAY_ADMIN_KEY": ADMIN_KEY,
            "GATEWAY_DATA_DIR": str(tmp_path / "data"), "GATEWAY_PORT": str(free_port())}


@pytest.mark.parametrize("module", ["gateway.providers.vendorA", "gateway.schema.rerank"])
def test_a_module_that_fails_to_import_stops_the_start_with_its_traceback(tmp_path, module):
    done = subprocess.run([sys.executable, "-m", "gateway", "serve"], cwd=ROOT, env=blocked_env(tmp_path, module),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" in done.stderr and f"simulated failure importing {module}" in done.stderr


def test_a_provider_loaded_on_first_use_that_cannot_load_fails_its_requests_only(tmp_path, mock):
    """Providers with their own wire format are imported on the first request that names them: a broken one answers
    500 naming it, in the error format, and the worker serves every other provider."""
    env = blocked_env(tmp_path, "gateway.providers.cohere")
    server = start_gateway({key: value for key, value in env.items() if key != "GATEWAY_PORT"})
    try:
        headers = {"x-gateway-api-key": ADMIN_KEY, "authorization": "Bearer sk-test",
                   "x-gateway-custom-host": f"{mock.url}/v1"}
        broken = post(f"{server.url}/v1/embeddings", {"model": "embed-english-v3.0", "input": "hi"},
                      {**headers, "x-gateway-provider": "cohere"})
        assert broken.status == 500, broken.text
        error = broken.json()["error"]
        assert error["code"] == "provider_unavailable" and error["param"] == "provider" and "cohere" in error["message"]
        served = post(f"{server.url}/v1/chat/completions", CHAT, {**headers, "x-gateway-provider": "vendorA"})
        assert served.status == 200, served.text
    finally:
        server.stop()
    assert "simulated failure importing gateway.providers.cohere" in server.output()


HEAD_ROUTES = ["/health", "/ready", "/console", "/console/main.js", "/v1/models", "/v1/configs", "/v1/logs",
               "/metrics", "/v1/configs/cfg-none", "/v1/prompts", "/v1/files"]


@pytest.mark.parametrize("path", HEAD_ROUTES)
def test_head_answers_like_the_get_without_a_body(gateway, path):
    key = {"x-gateway-api-key": ADMIN_KEY}
    got = request("GET", gateway.url + path, headers=key)
    head = request("HEAD", gateway.url + path, headers=key)
    assert head.status == got.status and head.body == b""
    skip = {"date", "x-gateway-trace-id", "content-length"}
    assert {k: v for k, v in head.headers.items() if k not in skip} == \
        {k: v for k, v in got.headers.items() if k not in skip}
    if path == "/metrics":  # its figures (process CPU and memory among them) move between the two requests
        assert int(head.headers["content-length"]) > 0
    else:
        assert head.headers["content-length"] == str(len(got.body))
    assert head.headers["x-gateway-cache-status"] == "DISABLED"


def test_head_without_a_key_answers_the_gets_401(gateway):
    head = request("HEAD", f"{gateway.url}/v1/configs")
    assert head.status == 401 and head.body == b""
    assert head.headers["content-length"] == str(len(request("GET", f"{gateway.url}/v1/configs").body))


def test_head_of_a_post_route_is_405_naming_the_allowed_methods(gateway):
    head = request("HEAD", f"{gateway.url}/v1/chat/completions", headers={"x-gateway-api-key": ADMIN_KEY})
    assert head.status == 405 and head.headers["allow"] == "POST" and head.body == b""
    head = request("HEAD", f"{gateway.url}/v1/nothing", headers={"x-gateway-api-key": ADMIN_KEY})
    assert head.status == 404 and head.body == b"" and head.headers["x-gateway-cache-status"] == "DISABLED"
    assert request("PUT", f"{gateway.url}/health").headers["allow"] == "GET, HEAD"


def test_head_of_the_endless_log_stream_answers_its_head_at_once(gateway):
    head = request("HEAD", f"{gateway.url}/v1/logs/stream", headers={"x-gateway-api-key": ADMIN_KEY}, timeout=10)
    assert head.status == 200 and head.body == b""
    assert head.headers["content-type"].startswith("text/event-stream")
    assert head.headers["x-gateway-cache-status"] == "DISABLED"
    assert request("GET", f"{gateway.url}/health").status == 200  # the worker is not stuck on it


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/v1/nothing", 404), ("DELETE", "/health", 405), ("GET", "/v1/configs", 200),
    ("POST", "/v1/configs", 400), ("GET", "/v1/api-keys", 200), ("GET", "/console", 200),
    ("GET", "/metrics", 200), ("POST", "/v1/chat/completions", 400), ("POST", "/v1/responses", 400),
    ("POST", "/v1/messages", 400),
])
def test_every_answer_carries_the_cache_status(gateway, method, path, status):
    resp = request(method, gateway.url + path, b"{}" if method == "POST" else None,
                   headers={"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"})
    assert resp.status == status, resp.text
    assert resp.all("x-gateway-cache-status") == ["DISABLED"]


def test_a_malformed_config_header_says_json_in_capitals(gateway):
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT, {"x-gateway-api-key": ADMIN_KEY,
                                                             "x-gateway-config": "{nope"})
    assert resp.status == 400
    message = resp.json()["error"]["message"]
    assert "not valid JSON (JSON is malformed" in message and "jSON" not in message


IDLE_PROBE = """
import asyncio, json, sys
import gateway.app as appmod

async def boot():
    sent = []
    messages = iter([{"type": "lifespan.startup"}])

    async def receive():
        try:
            return next(messages)
        except StopIteration:
            await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    asyncio.get_running_loop().create_task(appmod.app({"type": "lifespan"}, receive, send))
    while not sent:
        await asyncio.sleep(0.02)
    assert sent[0]["type"] == "lifespan.startup.complete", sent

asyncio.run(boot())
import gc
print(json.dumps({"gc": [gc.get_threshold()[2], gc.get_freeze_count() > 0]}))
print(json.dumps(sorted(name for name in LAZY if name in sys.modules)))
"""
#: what a worker loads only when a request first needs it (a provider named, a front door, a batch run or an MCP
#: call), and what it never needs (the package's installed metadata)
LAZY = ["gateway.providers.anthropic", "gateway.providers.cloudA", "gateway.providers.cloudA.sigv4",
        "gateway.providers.cloudC", "gateway.providers.cloudC.auth", "gateway.providers.cohere",
        "gateway.pipeline.dialects.door", "gateway.pipeline.dialects.responses", "gateway.pipeline.dialects.messages",
        "gateway.jobs.batch_runner", "gateway.jobs.batch_dispatch", "cryptography", "gateway.realtime.endpoint",
        "gateway.mcp.catalog", "gateway.mcp.upstream", "gateway.mcp.wire", "gateway.http.jsonrpc",
        "importlib.metadata"]


def test_an_idle_worker_has_not_loaded_what_is_loaded_on_first_use(tmp_path):
    code = f"LAZY = {LAZY!r}\n" + IDLE_PROBE
    env = {"PATH": "/usr/bin:/bin", "GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_ADMIN_KEY": ADMIN_KEY}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_started_worker_freezes_what_start_up_made_and_collects_fully_less_often(tmp_path):
    """What start-up built is never rescanned by the collector, and full collections (which walk every open
    stream's objects) wait for 100 middle-generation ones (bench/RESULTS.md: a 5,000-stream burst's first byte)."""
    from gateway.app import FULL_COLLECTION_AFTER

    code = f"LAZY = {LAZY!r}\n" + IDLE_PROBE
    env = {"PATH": "/usr/bin:/bin", "GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_ADMIN_KEY": ADMIN_KEY}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-2] == '{"gc": [%d, true]}' % FULL_COLLECTION_AFTER


def test_every_provider_loaded_on_first_use_imports_and_builds():
    from gateway.providers.base import ProviderAdapter
    from gateway.providers.registry import NATIVE, ProviderRegistry, native_adapter_class

    registry = ProviderRegistry(client=None)  # type: ignore[arg-type]
    for name in NATIVE:
        assert issubclass(native_adapter_class(name), ProviderAdapter)
        assert registry.get(name) is registry.get(name)
