"""What policy checks add to one request, per backend (embedded SQLite, Redis on loopback; memory for reference).

Run with ``python -m pytest bench/micro/test_policies_bench.py --benchmark-enable -s``. Each benchmark awaits
``PER_CALL`` sequential admissions on a uvloop loop (as a worker does) and prints the median per request:

- *no policy*: the workspace has none: what every request pays (one dictionary lookup, no store call);
- *1 policy* / *10 policies*: that many request-count policies match the request: one ``reserve`` with that many
  counters (final, nothing to settle);
- *1 token policy*: a token budget: the ``reserve`` of an estimate and, after the answer, its ``settle`` (which
  a worker runs in the background; timed here in sequence, so this is the full store cost per request).

Redis comes from GATEWAY_TEST_REDIS_URL (keys under a random prefix, deleted afterwards).
"""

from __future__ import annotations

import tempfile

import pytest
import uvloop

from gateway.config.validate import ConfigParser
from gateway.controlplane.policies import Condition, GroupBy, RateLimitPolicy, UsageLimitPolicy
from gateway.http.context import build_context
from gateway.observability.record import RequestRecord
from gateway.policies.gate import PolicyGate
from gateway.policies.settle import actual_amounts
from gateway.routing.plan import Planner
from gateway.schema.chat import parse_chat
from gateway.schema.common import Usage
from gateway.schema.config import Config
from gateway.settings import Settings
from gateway.state.memory import MemoryStateStore
from gateway.state.redis import RedisStateStore
from gateway.state.sqlite import SQLiteStateStore
from tests.support.redis_servers import delete_prefix, random_prefix, test_redis_url

PER_CALL = 200
BODY = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":64}'
HUGE = 10**12
_gates: list[PolicyGate] = []  # closed (their settlement tasks stopped) when the backend fixture ends


@pytest.fixture(params=["memory", "embedded", "redis"])
def backend(request):
    loop = uvloop.new_event_loop()
    if request.param == "memory":
        store = MemoryStateStore()
    elif request.param == "embedded":
        folder = tempfile.mkdtemp(prefix="gw-bench-")
        store = SQLiteStateStore(folder + "/state.db", folder + "/cache.db")
    else:
        store = RedisStateStore(test_redis_url(), key_prefix=random_prefix())
    loop.run_until_complete(store.start())
    yield request.param, store, loop
    for gate in _gates:
        loop.run_until_complete(gate.close())
    _gates.clear()
    if request.param == "redis":
        loop.run_until_complete(delete_prefix(store._client, store.prefix))
    loop.run_until_complete(store.close())
    loop.close()


def gate_with(store, loop, count: int, type_: str = "requests") -> PolicyGate:
    gate = PolicyGate(store, Settings(), lambda key: "key-1")
    conditions = [Condition("workspace_id", "*"), Condition("model", "gpt-4o*")]
    for i in range(count):
        if type_ == "requests" and i % 2 == 0:
            record = RateLimitPolicy(type="requests", unit="rpm", value=HUGE, conditions=conditions,
                                     group_by=[GroupBy("api_key")], name=f"rate {i}")
            loop.run_until_complete(gate.rate_limits.create(record))
        else:
            record = UsageLimitPolicy(type=type_, credit_limit=HUGE, conditions=conditions,
                                      group_by=[GroupBy("metadata._user")], name=f"usage {i}")
            loop.run_until_complete(gate.usage_limits.create(record))
    loop.run_until_complete(gate.refresh())
    _gates.append(gate)
    return gate


def request_parts():
    ctx = build_context([(b"x-gateway-api-key", b"k"), (b"x-gateway-metadata", b'{"_user": "alice"}')])
    ctx.workspace = "default"
    return ctx, parse_chat(BODY), Planner(ConfigParser()).plan(Config(provider="vendorA", api_key="sk"))


def report(benchmark, backend_name: str, name: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # --benchmark-disable: ran once, nothing measured
        return
    per_call_us = stats.stats.median / PER_CALL * 1e6
    benchmark.extra_info["per_request_us"] = round(per_call_us, 2)
    print(f"\n{backend_name:9s} {name:26s} {per_call_us:9.2f} us per request")


def test_no_policy(benchmark, backend):
    name, store, loop = backend
    gate = gate_with(store, loop, 0)
    ctx, chat, node = request_parts()

    async def calls() -> None:
        for _ in range(PER_CALL):
            if gate.may_apply(ctx.workspace):
                await gate.admit(ctx, chat, len(BODY), node)

    benchmark(lambda: loop.run_until_complete(calls()))
    report(benchmark, name, "no policy")


@pytest.mark.parametrize("count", [1, 10])
def test_matching_policies(benchmark, backend, count):
    name, store, loop = backend
    gate = gate_with(store, loop, count)
    ctx, chat, node = request_parts()

    async def calls() -> None:
        for _ in range(PER_CALL):
            if gate.may_apply(ctx.workspace):
                hold = await gate.admit(ctx, chat, len(BODY), node)
                assert hold is None  # request counts only: final at admission

    benchmark(lambda: loop.run_until_complete(calls()))
    report(benchmark, name, f"{count} polic{'y' if count == 1 else 'ies'}")


def test_token_policy_with_settle(benchmark, backend):
    name, store, loop = backend
    gate = gate_with(store, loop, 1, "tokens")
    ctx, chat, node = request_parts()
    record = RequestRecord("t", "chat", 0.0)
    record.status = 200
    record.usage = Usage(prompt_tokens=12, completion_tokens=40, total_tokens=52)

    async def calls() -> None:
        for _ in range(PER_CALL):
            hold = await gate.admit(ctx, chat, len(BODY), node)
            await store.settle(hold.scope, hold.rid, hold.items, actual_amounts(hold, record, gate.prices))

    benchmark(lambda: loop.run_until_complete(calls()))
    report(benchmark, name, "1 token policy + settle")
