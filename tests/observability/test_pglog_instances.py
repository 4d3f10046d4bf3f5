"""Two gateway instances (two workers each) sharing Redis and one PostgreSQL log store, and PostgreSQL going away
under load: through the real gateways, a real PostgreSQL, and the provider mock."""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import pytest

from tests.support.http import post, request
from tests.support.inprocess import start_in_process
from tests.support.postgres import PrivatePostgres, pg_url  # noqa: F401 - a fixture
from tests.support.servers import ADMIN_KEY, free_port, start_gateway
from tests.support.sse import EventStream

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
ADMIN = {"x-gateway-api-key": ADMIN_KEY}


def chat_headers(base: str, trace: str) -> dict[str, str]:
    return {**ADMIN, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1",
            "authorization": "Bearer sk-test", "content-type": "application/json", "x-gateway-trace-id": trace}


def listed(server, trace: str, count: int, timeout: float = 5.0) -> list[dict]:
    """``/v1/logs`` of ``trace`` once it holds ``count`` items (or the last answer at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        items = request("GET", f"{server.url}/v1/logs?trace_id={trace}&limit=100", headers=ADMIN).json()["data"]
        if len(items) >= count or time.monotonic() > deadline:
            return items
        time.sleep(0.1)


@pytest.fixture
def two_instances(mock_server, shared_redis, pg_url):  # noqa: F811
    env = {**shared_redis, "GATEWAY_LOG_STORE_URL": pg_url}
    first = start_gateway(env, workers=2)
    try:
        second = start_gateway(env, workers=2)
    except Exception:
        first.stop()
        raise
    yield first, second
    second.stop()
    first.stop()


def test_two_instances_show_one_log_one_live_stream_and_one_set_of_aggregates(two_instances, mock):
    a, b = two_instances
    trace = f"shared-{uuid.uuid4().hex}"
    base = mock.scenario()
    live = EventStream(f"{a.url}/v1/logs/stream?trace_id={trace}", ADMIN)
    try:
        assert live.status == 200
        for _ in range(10):  # served by B only: A's live stream shows them
            assert post(f"{b.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
        from_b = live.logs(10, timeout=10)
        assert len(from_b) == 10
        for _ in range(10):
            assert post(f"{a.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
        from_a = live.logs(10, timeout=10)
        assert len(from_a) == 10
    finally:
        live.close()
    late = f"late-{uuid.uuid4().hex}"
    assert post(f"{b.url}/v1/chat/completions", CHAT, chat_headers(base, late)).status == 200
    answered = time.monotonic()
    assert len(listed(a, late, 1, timeout=10)) == 1
    assert time.monotonic() - answered < 3.0  # listed by the other instance within about a second
    streamed = {item["id"] for item in from_b + from_a}
    assert len(streamed) == 20
    on_a, on_b = listed(a, trace, 20), listed(b, trace, 20)
    assert {item["id"] for item in on_a} == {item["id"] for item in on_b} == streamed
    for server in (a, b):  # the database is this test's own: every request counted once, whoever asks
        totals = request("GET", f"{server.url}/v1/logs/aggregates?window=15m", headers=ADMIN).json()["totals"]
        assert totals["requests"] == 21 and totals["by_status"] == {"200": 21}


async def _stored(url: str) -> tuple[list[str], int]:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        traces = [r[0] for r in await conn.fetch("SELECT trace_id FROM gateway.request_logs")]
        requests = await conn.fetchval("SELECT coalesce(sum(requests), 0) FROM gateway.log_rollups WHERE res = 10")
        return traces, int(requests)
    finally:
        await conn.close()


def test_a_postgresql_outage_under_load_loses_no_record_and_no_request_waits(mock_server, mock):
    pg = PrivatePostgres().start()
    server = start_gateway({"GATEWAY_LOG_STORE_URL": pg.url}, workers=2)
    base = mock.scenario()
    run = uuid.uuid4().hex[:8]
    sent: list[str] = []
    took: list[float] = []

    def one(i: int) -> int:
        trace = f"outage-{run}-{i}"
        started = time.monotonic()
        status = post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, trace), timeout=30).status
        took.append(time.monotonic() - started)
        sent.append(trace)
        return status

    try:
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(one, range(700)))
            pg.stop()  # the store goes away mid-load
            statuses += list(pool.map(one, range(700, 1700)))
            health = request("GET", f"{server.url}/health").json()["log_store"]
            away = request("GET", f"{server.url}/v1/logs", headers=ADMIN)
            pg.start()
            statuses += list(pool.map(one, range(1700, 2500)))
        assert statuses == [200] * 2500
        assert max(took) < 3.0  # nobody waited for PostgreSQL (its connect timeout alone is 10 s)
        assert health["backend"] == "postgresql"
        assert away.status == 503 and away.json()["error"]["code"] == "log_store_unavailable"
        deadline = time.monotonic() + 60
        while True:
            traces, counted = asyncio.run(_stored(pg.url))
            if len(traces) >= 2500 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(traces) == 2500 and sorted(traces) == sorted(sent)  # each request once
        assert counted == 2500
        metrics = request("GET", f"{server.url}/metrics", headers=ADMIN).text
        spooled = [line for line in metrics.splitlines() if line.startswith("gateway_log_records_spooled_total")]
        assert spooled and float(spooled[0].split()[-1]) > 0
        assert 'reason="spool_full"' not in metrics
    finally:
        server.stop()
        pg.remove()


def test_a_full_spool_is_counted_and_the_gateway_keeps_serving(mock_server, mock):
    away = f"postgresql://gateway:gateway@127.0.0.1:{free_port()}/nowhere"
    server = start_gateway({"GATEWAY_LOG_STORE_URL": away, "GATEWAY_LOG_SPOOL_MAX_BYTES": "20000"})
    base = mock.scenario()
    try:
        for i in range(300):
            assert post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, f"full-{i}")).status == 200
        deadline = time.monotonic() + 10
        while True:
            store = request("GET", f"{server.url}/health").json()["log_store"]
            if store["dropped"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert store["healthy"] is False and store["dropped"] > 0 and store["spooled_bytes"] <= 20000
        time.sleep(1.5)  # metrics are flushed about once a second
        metrics = request("GET", f"{server.url}/metrics", headers=ADMIN).text
        assert 'gateway_log_records_dropped_total{reason="spool_full"}' in metrics
        assert server.proc.poll() is None
    finally:
        server.stop()


async def _silence_listeners(url: str, seconds: float) -> int:
    """Terminate every connection listening for new log batches in this test's database, again and again for
    ``seconds``: what a live stream sees while the database restarts or fails over. Returns how many were
    terminated."""
    conn = await asyncpg.connect(url)
    killed = 0
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            killed += await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE pid <> pg_backend_pid() AND datname = current_database() AND query LIKE 'LISTEN%'")
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    return killed


def test_a_live_stream_misses_no_record_stored_while_it_could_not_listen(mock_server, mock, pg_url):  # noqa: F811
    server = start_in_process({"GATEWAY_LOG_STORE_URL": pg_url})
    trace = f"gap-{uuid.uuid4().hex}"
    base = mock.scenario()
    live = EventStream(f"{server.url}/v1/logs/stream?trace_id={trace}", ADMIN)
    try:
        assert live.status == 200
        assert post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
        assert len(live.logs(1, timeout=10)) == 1  # delivered as notified
        with ThreadPoolExecutor(1) as pool:
            silenced = pool.submit(asyncio.run, _silence_listeners(pg_url, 4.0))
            time.sleep(0.5)
            for _ in range(5):  # stored while no connection listens: no notification reaches the stream
                assert post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, trace)).status == 200
            assert len(listed(server, trace, 6, timeout=3.0)) == 6
            assert silenced.result() >= 1
        caught_up = live.logs(5, timeout=15)  # read when the stream listens again
        assert len(caught_up) == 5 and all(item["trace_id"] == trace for item in caught_up)
        late = post(f"{server.url}/v1/chat/completions", CHAT, chat_headers(base, trace))
        assert late.status == 200 and len(live.logs(1, timeout=10)) == 1  # and goes on, nothing twice
        assert live.logs(1, timeout=1.0) == []
    finally:
        live.close()
        server.stop()
