"""Gateway-run batches survive their gateway: a gateway killed mid-batch (SIGKILL) and started again finishes it,
and with several instances on one Redis exactly one runs a batch and another takes it over when its holder dies;
in both, the output holds exactly one line per input line, in input order."""

from __future__ import annotations

import io

import msgspec
import pytest
import redis
from openai import OpenAI

from tests.support.poll import wait_for
from tests.support.processes import kill_tree
from tests.support.redis_servers import random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = "/v1/chat/completions"
LINES = 600
BATCH_S = 120.0  # a wait on a batch: 600 lines on a loaded box
FAST = {"GATEWAY_BATCH_LEASE_MS": "2000", "GATEWAY_BATCH_POLL_MS": "200", "GATEWAY_BATCH_CONCURRENCY": "8"}


def jsonl(n: int) -> bytes:
    return b"".join(msgspec.json.encode({"custom_id": f"line-{i}", "method": "POST", "url": CHAT, "body": {
        "model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}}) + b"\n" for i in range(1, n + 1))


def client(server, base: str | None = None) -> OpenAI:
    headers = {} if base is None else {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                                       "x-gateway-custom-host": base + "/v1"}
    return OpenAI(base_url=f"{server.url}/v1", api_key=ADMIN_KEY if base is None else "sk-up",
                  default_headers=headers, max_retries=2, timeout=30)


def start_batch(server, base: str) -> str:
    file_id = client(server).files.create(file=("in.jsonl", io.BytesIO(jsonl(LINES))), purpose="batch").id
    return client(server, base).batches.create(input_file_id=file_id, endpoint=CHAT,
                                               completion_window="immediate").id


def progressed(server, batch_id: str, at_least: int):
    batch = client(server).batches.retrieve(batch_id)
    return batch if batch.request_counts.completed >= at_least else None


def finished(server, batch_id: str):
    batch = client(server).batches.retrieve(batch_id)
    return batch if batch.status == "completed" else None


def assert_one_line_per_input_line(server, batch) -> None:
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (
        LINES, LINES, 0)
    assert batch.error_file_id is None
    content = client(server).files.content(batch.output_file_id).content
    ids = [msgspec.json.decode(line)["custom_id"] for line in content.splitlines()]
    assert ids == [f"line-{i}" for i in range(1, LINES + 1)]


def test_a_gateway_killed_mid_batch_finishes_it_after_a_restart(mock, tmp_path):
    base = mock.scenario([{"delay_ms": 20}])
    data_dir = str(tmp_path / "data")
    first = start_gateway(FAST, data_dir=data_dir)
    try:
        batch_id = start_batch(first, base)
        wait_for(lambda: progressed(first, batch_id, 60), BATCH_S, 0.2)
    finally:
        kill_tree(first.proc.pid)
        first.proc.wait(10)
    sent_at_kill = mock.calls(base)["calls"]
    assert sent_at_kill < LINES, "the batch finished before the kill; make the mock slower"
    second = start_gateway(FAST, data_dir=data_dir)
    try:
        batch = wait_for(lambda: finished(second, batch_id), BATCH_S, 0.2)
        assert_one_line_per_input_line(second, batch)
        calls = mock.calls(base)["calls"]
        assert LINES <= calls <= LINES + 8  # at-least-once: only lines in flight at the kill went twice
    finally:
        second.stop()


@pytest.fixture
def shared_redis():
    url = test_redis_url()
    prefix = random_prefix()
    # one secret key: an instance opens the batch headers another sealed
    yield {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix, "GATEWAY_STATE_TIMEOUT_MS": "3000",
           "GATEWAY_SECRET_KEY": f"secret-{prefix}"}
    conn = redis.Redis.from_url(url)
    for key in conn.scan_iter(match=prefix + "*", count=500):
        conn.delete(key)
    conn.close()


def test_instances_on_one_redis_run_a_batch_once_and_take_over_from_a_dead_one(mock, shared_redis):
    env = FAST | shared_redis
    base = mock.scenario([{"delay_ms": 20}])
    a = start_gateway(env)
    b = start_gateway(env)
    try:
        quick_base = mock.scenario()
        quick = start_batch(a, quick_base)  # both instances poll: one runs it, and only once
        assert_one_line_per_input_line(b, wait_for(lambda: finished(b, quick), BATCH_S, 0.2))
        assert mock.calls(quick_base)["calls"] == LINES
        batch_id = start_batch(a, base)
        wait_for(lambda: progressed(b, batch_id, 60), BATCH_S, 0.2)
        kill_tree(a.proc.pid)  # whichever instance ran it, the batch must finish on b
        a.proc.wait(10)
        batch = wait_for(lambda: finished(b, batch_id), BATCH_S, 0.2)
        assert_one_line_per_input_line(b, batch)
        assert LINES <= mock.calls(base)["calls"] <= LINES + 8
    finally:
        a.stop()
        b.stop()
