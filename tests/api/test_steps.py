"""A request whose config has no cache and no guardrail makes no cache or guardrail step and no state-store call;
a flag on the routing tree decides, for the root and for every target."""

from __future__ import annotations

import msgspec
import pytest

from gateway.api.config_checks import config_checks
from gateway.app import GatewayApp
from gateway.config.validate import ConfigParser
from gateway.routing.plan import Planner
from gateway.runtime import Runtime
from gateway.settings import load
from gateway.state.memory import MemoryStateStore
from tests.support.asgi import call
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class CountingStore(MemoryStateStore):
    """Counts every state-store call made while ``counting`` is on (the records watcher's poll excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.counting = False
        self.calls: list[str] = []

    def __getattribute__(self, name: str):
        attr = super().__getattribute__(name)
        if (name.startswith(("cache_", "log_", "record_", "breaker_", "get", "set", "incr", "reserve"))
                and callable(attr) and super().__getattribute__("counting")):
            super().__getattribute__("calls").append(name)
        return attr


@pytest.fixture
async def app(tmp_path):
    settings = load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_DATA_DIR": str(tmp_path),
                     "GATEWAY_ALLOW_PRIVATE_HOSTS": "127.0.0.1"})
    store = CountingStore()
    runtime = Runtime(settings, store=store)
    gateway_app = GatewayApp(runtime)  # before the start: the app adds its routes' services to the runtime's lifecycle
    await runtime.start()
    yield gateway_app, runtime, store
    await runtime.close()


def test_the_routing_tree_says_where_steps_apply():
    parser = ConfigParser(config_checks())
    planner = Planner(parser)

    def plan_for(text: str):
        return planner.plan(parser.parse(text))

    key = '"provider": "vendorA", "api_key": "k"'
    plain = plan_for("{" + key + "}")
    assert not plain.has_steps and not plain.tree_has_steps
    cached = plan_for('{"strategy": {"mode": "fallback"}, "targets": [{' + key + '}, {' + key +
                      ', "cache": {"mode": "simple"}}]}')
    assert cached.tree_has_steps and not cached.children[0].has_steps and cached.children[1].has_steps
    inherited = plan_for('{"output_guardrails": [{"default.wordCount": {"maxWords": 3}}], '
                         '"strategy": {"mode": "single"}, "targets": [{' + key + '}]}')
    assert inherited.children[0].has_steps


async def test_a_plain_request_makes_no_step_and_no_store_call(app, mock):
    gateway_app, runtime, store = app
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
               "x-gateway-custom-host": mock.url + "/v1", "content-type": "application/json"}
    store.counting = True
    resp = await call(gateway_app, "POST", "/v1/chat/completions", CHAT, headers)
    store.counting = False
    assert resp.status == 200 and resp.headers["x-gateway-cache-status"] == "DISABLED"
    assert store.calls == []
    assert runtime._steps is None  # the cache and guardrail machinery is not even made (nor imported)
    cfg = {"provider": "vendorA", "api_key": "sk", "custom_host": mock.url + "/v1", "cache": {"mode": "simple"}}
    store.counting = True
    resp = await call(gateway_app, "POST", "/v1/chat/completions", CHAT,
                      {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(cfg).decode()})
    store.counting = False
    assert resp.headers["x-gateway-cache-status"] == "MISS" and "cache_get" in store.calls
    assert runtime._steps is not None


def test_a_worker_that_uses_no_cache_or_guardrail_never_imports_them():
    import subprocess
    import sys

    code = ("import sys, tempfile; from gateway.app import GatewayApp; from gateway.runtime import Runtime; "
            "from gateway.settings import load; GatewayApp(Runtime(load({'GATEWAY_DATA_DIR': tempfile.mkdtemp()}))); "
            "print(sorted(m for m in sys.modules if m.startswith(('gateway.guardrails', 'gateway.cache', "
            "'gateway.pipeline.steps', 'numpy', 'onnxruntime'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class NoRoomEmbedder:
    """An embedder whose pool is always full: every embedding answers None at once."""

    model_id = "no-room"
    dimensions = 384

    def __init__(self) -> None:
        self.asked = 0

    async def embed(self, text: str):
        self.asked += 1
        return None

    async def close(self) -> None:
        return None


async def test_a_full_embedding_pool_is_a_miss_never_an_error(app, mock):
    from gateway.cache.semantic import SemanticCache

    gateway_app, runtime, store = app
    embedder = NoRoomEmbedder()
    runtime.steps._semantic = SemanticCache(store, embedder, 0.89, 100, runtime.steps.clock)
    cfg = {"provider": "vendorA", "api_key": "sk", "custom_host": mock.url + "/v1", "cache": {"mode": "semantic"}}
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(cfg).decode()}
    body = {"model": "m", "messages": [{"role": "user", "content": "a question nobody asked before"}]}
    resp = await call(gateway_app, "POST", "/v1/chat/completions", body, headers)
    assert resp.status == 200 and resp.headers["x-gateway-cache-status"] == "MISS"
    assert embedder.asked == 2  # the lookup, then once more when publishing (later tries go on in the background)
    await runtime.steps.cache.drain()  # the answer is stored under its exact key; no entry without a vector
    assert (await call(gateway_app, "POST", "/v1/chat/completions", body, headers)).headers[
        "x-gateway-cache-status"] == "HIT"
