"""``/v1/batches`` through the real gateway with the vendorA SDK against the mock: batches the gateway runs
(create, poll, cancel, list paging, output content; a 1,000-line batch with 429s, 500s and bad lines) and batches
forwarded to the provider; every bad field a 400 naming it before anything is sent upstream."""

from __future__ import annotations

import io
import time

import msgspec
import pytest
from openai import BadRequestError, ConflictError, NotFoundError, OpenAI

from tests.support.http import post
from tests.support.policies import tag, usage_limit
from tests.support.servers import ADMIN_KEY

CHAT = "/v1/chat/completions"


def jsonl(n: int, bad: tuple[int, ...] = (), prefix: str = "req") -> bytes:
    out = []
    for i in range(1, n + 1):
        if i in bad:
            out.append(b'{"custom_id": "broken", "method": "POST"' if i % 2 else
                       msgspec.json.encode({"custom_id": f"{prefix}-{i}", "method": "POST", "url": CHAT,
                                            "body": {"model": "m", "messages": []}}))
        else:
            out.append(msgspec.json.encode({"custom_id": f"{prefix}-{i}", "method": "POST", "url": CHAT, "body": {
                "model": "mock-model", "messages": [{"role": "user", "content": f"question {i}"}]}}))
    return b"\n".join(out) + b"\n"


@pytest.fixture
def plain(gateway) -> OpenAI:
    return OpenAI(base_url=f"{gateway.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60,
                  http_client=gateway.http_client())


def gateway_file(client: OpenAI, content: bytes) -> str:
    return client.files.create(file=("batch.jsonl", io.BytesIO(content)), purpose="batch").id


def wait_status(client: OpenAI, batch_id: str, statuses: tuple[str, ...], timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in statuses:
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.status}"
        time.sleep(0.2)


def read_jsonl(client: OpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    return [msgspec.json.decode(line) for line in client.files.content(file_id).content.splitlines()]


def test_a_gateway_run_batch_from_upload_to_output(plain, openai_client, mock):
    base = mock.scenario()
    runner = openai_client(base + "/v1")
    file_id = gateway_file(plain, jsonl(12, bad=(5,)))
    created = runner.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="immediate",
                                    metadata={"team": "search", "run": "7"})
    assert created.id.startswith("batch_gw_") and created.status == "validating"
    assert created.expires_at > created.created_at and created.metadata == {"team": "search", "run": "7"}
    done = wait_status(plain, created.id, ("completed", "failed"))  # no provider headers needed to follow it
    assert done.status == "completed"
    assert done.created_at <= done.in_progress_at <= done.finalizing_at <= done.completed_at
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (12, 11, 1)
    assert [(e.code, e.line) for e in done.errors.data] == [("invalid_json_line", 5)]
    assert done.usage.total_tokens > 0
    output = read_jsonl(plain, done.output_file_id)
    assert [line["custom_id"] for line in output] == [f"req-{i}" for i in range(1, 13) if i != 5]
    first = output[0]
    assert first["id"].startswith("batch_req_") and first["error"] is None
    assert first["response"]["status_code"] == 200 and first["response"]["body"]["object"] == "chat.completion"
    errors = read_jsonl(plain, done.error_file_id)
    assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [(None, "invalid_json_line")]
    assert plain.files.retrieve(done.output_file_id).purpose == "batch_output"
    assert mock.calls(base)["calls"] == 11
    sent = mock.calls(base)["requests"][0]
    assert sent["headers"]["authorization"] == "Bearer sk-provider-token" and sent["path"] == CHAT


def test_cancel_moves_to_cancelling_then_cancelled_keeping_finished_lines(plain, openai_client, mock):
    base = mock.scenario([{"delay_ms": 150}])
    runner = openai_client(base + "/v1")
    batch = runner.batches.create(input_file_id=gateway_file(plain, jsonl(300)), endpoint=CHAT,
                                  completion_window="immediate")
    wait_status(plain, batch.id, ("in_progress",))
    deadline = time.monotonic() + 30
    while plain.batches.retrieve(batch.id).request_counts.completed < 16:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    cancelling = plain.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    done = wait_status(plain, batch.id, ("cancelled",))
    assert done.cancelled_at >= done.cancelling_at
    output, errors = read_jsonl(plain, done.output_file_id), read_jsonl(plain, done.error_file_id)
    assert len(output) + len(errors) == 300
    assert [x["custom_id"] for x in output] == sorted((x["custom_id"] for x in output), key=lambda c: int(c[4:]))
    assert errors and {e["error"]["code"] for e in errors} == {"batch_cancelled"}
    assert done.request_counts.completed == len(output) < 300
    with pytest.raises(ConflictError):
        plain.batches.cancel(batch.id)


def test_gateway_batches_list_newest_first_in_pages(plain, openai_client, mock):
    runner = openai_client(mock.scenario() + "/v1")
    file_id = gateway_file(plain, jsonl(2))
    ids = [runner.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="immediate").id
           for _ in range(3)]
    listed = [b.id for b in plain.batches.list(limit=100).data]
    assert listed.index(ids[2]) < listed.index(ids[1]) < listed.index(ids[0])
    page = plain.batches.list(limit=2)
    assert len(page.data) == 2 and page.has_more
    assert (page.first_id, page.last_id) == (page.data[0].id, page.data[1].id)
    following = plain.batches.list(limit=2, after=page.last_id)
    assert following.data[0].id == listed[2]
    with pytest.raises(BadRequestError) as caught:
        plain.batches.list(limit=101)
    assert caught.value.param == "limit"
    for batch_id in ids:
        wait_status(plain, batch_id, ("completed",))


@pytest.mark.parametrize("body, param", [
    ({"completion_window": "immediate", "endpoint": CHAT}, "input_file_id"),
    ({"input_file_id": "file-gw-x", "endpoint": CHAT}, "completion_window"),
    ({"input_file_id": "file-gw-x", "completion_window": "1h", "endpoint": CHAT}, "completion_window"),
    ({"input_file_id": "file-gw-x", "completion_window": "immediate"}, "endpoint"),
    ({"input_file_id": "file-gw-x", "completion_window": "immediate", "endpoint": "/v1/moderations"}, "endpoint"),
    ({"input_file_id": "file-gw-x", "completion_window": "24h", "endpoint": CHAT,
      "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"input_file_id": "file-gw-x", "completion_window": "24h", "endpoint": CHAT,
      "metadata": {"k" * 65: "v"}}, "metadata." + "k" * 64),
    ({"input_file_id": "file-gw-x", "completion_window": "24h", "endpoint": CHAT,
      "metadata": {"k": "v" * 513}}, "metadata.k"),
    ({"input_file_id": "file-abc", "completion_window": "immediate", "endpoint": CHAT}, "completion_window"),
    ({"input_file_id": "file-gw-x", "completion_window": "immediate", "endpoint": CHAT, "colour": "red"}, "colour"),
    ({"input_file_id": "file-abc", "completion_window": "24h", "endpoint": CHAT, "model": "gpt-4o"}, "model"),
    ({"input_file_id": "file-abc", "completion_window": "24h", "endpoint": CHAT,
      "output_expires_after": {"anchor": "created_at", "seconds": 3599}}, "output_expires_after.seconds"),
    ({"input_file_id": "file-gw-x", "completion_window": "immediate", "endpoint": CHAT,
      "output_expires_after": {"anchor": "created_at", "seconds": 2_592_001}}, "output_expires_after.seconds"),
    ({"input_file_id": "file-abc", "completion_window": "24h", "endpoint": CHAT,
      "output_expires_after": {"anchor": "completed_at", "seconds": 7200}}, "output_expires_after.anchor"),
    ({"input_file_id": "file-abc", "completion_window": "24h", "endpoint": CHAT,
      "output_expires_after": {"seconds": 7200}}, "output_expires_after.anchor"),
])
def test_every_bad_field_is_a_400_naming_it_before_any_upstream_call(gateway, gw_headers, mock, body, param):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/batches", body, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param
    assert mock.calls(base)["calls"] == 0


def test_output_expires_after_sets_when_the_output_and_error_files_expire(plain, openai_client, mock):
    base = mock.scenario()
    runner = openai_client(base + "/v1")
    expiry = {"anchor": "created_at", "seconds": 7200}
    file_id = gateway_file(plain, jsonl(3, bad=(2,)))
    created = runner.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="immediate",
                                    output_expires_after=expiry)
    done = wait_status(plain, created.id, ("completed", "failed"))
    assert done.status == "completed"
    for made in (plain.files.retrieve(done.output_file_id), plain.files.retrieve(done.error_file_id)):
        assert made.expires_at == made.created_at + 7200  # counted from the file's creation, not the batch's
    kept = wait_status(plain, runner.batches.create(input_file_id=file_id, endpoint=CHAT,
                                                    completion_window="immediate").id, ("completed", "failed"))
    assert plain.files.retrieve(kept.output_file_id).expires_at is None  # without it: kept until deleted
    # a batch forwarded to the provider carries it as sent, and the provider's output file expires by it
    forwarded = runner.files.create(file=("in.jsonl", io.BytesIO(jsonl(2))), purpose="batch").id
    batch = runner.batches.create(input_file_id=forwarded, endpoint=CHAT, completion_window="24h",
                                  output_expires_after=expiry)
    sent = [c for c in mock.calls(base)["requests"] if c["path"] == "/v1/batches"][-1]
    assert msgspec.json.decode(sent["body"])["output_expires_after"] == expiry
    output = runner.files.retrieve(wait_status(runner, batch.id, ("completed",), timeout=20).output_file_id)
    assert output.expires_at == output.created_at + 7200


def test_an_unknown_body_field_is_a_400_naming_it_for_gateway_and_provider_batches(plain, openai_client, mock):
    base = mock.scenario()
    forwarded = openai_client(base + "/v1")
    for client, file_id in ((plain, gateway_file(plain, jsonl(1))), (forwarded, "file-abc")):
        with pytest.raises(BadRequestError) as caught:
            client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h",
                                  extra_body={"priority": "high"})
        assert caught.value.param == "priority" and "unknown field priority" in str(caught.value)
    assert mock.calls(base)["calls"] == 0


def test_a_gateway_batch_needs_a_provider_and_a_known_batch_file(plain, openai_client, mock):
    file_id = gateway_file(plain, jsonl(1))
    with pytest.raises(BadRequestError) as caught:
        plain.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="immediate")
    assert caught.value.param == "x-gateway-provider"
    runner = openai_client(mock.scenario() + "/v1")
    with pytest.raises(NotFoundError) as missing:
        runner.batches.create(input_file_id="file-gw-0000", endpoint=CHAT, completion_window="immediate")
    assert missing.value.body["param"] == "input_file_id"


def test_unknown_batch_ids_are_404s(plain):
    for call in (plain.batches.retrieve, plain.batches.cancel):
        with pytest.raises(NotFoundError) as caught:
            call("batch_gw_0123456789")
        assert caught.value.body["param"] == "batch_id"
    with pytest.raises(NotFoundError):
        plain.batches.retrieve("batch_abc")  # a provider's id, and no provider named


def test_a_thousand_lines_with_429s_500s_and_bad_lines(plain, openai_client, mock):
    steps = []
    for i in range(60):  # every tenth and every fourteenth call fails once; the retry succeeds
        steps.append({"times": 9})
        steps.append({"status": 500 if i % 2 else 429, "retry_after": "0"})
    base = mock.scenario(steps + [{"times": 1}])
    config = {"provider": "vendorA", "api_key": "sk-cfg", "custom_host": base + "/v1",
              "retry": {"attempts": 3, "on_status_codes": [429, 500]}}
    runner = openai_client(base + "/v1", **{"x-gateway-config": msgspec.json.encode(config).decode()})
    bad = (13, 250, 251, 777, 999)
    batch = runner.batches.create(input_file_id=gateway_file(plain, jsonl(1000, bad=bad)), endpoint=CHAT,
                                  completion_window="immediate")
    done = wait_status(plain, batch.id, ("completed", "failed"), timeout=180)
    assert done.status == "completed"
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (1000, 995, 5)
    assert sorted(e.line for e in done.errors.data) == list(bad)
    output = read_jsonl(plain, done.output_file_id)
    assert [x["custom_id"] for x in output] == [f"req-{i}" for i in range(1, 1001) if i not in bad]
    assert all(x["response"]["status_code"] == 200 for x in output)
    assert len(read_jsonl(plain, done.error_file_id)) == 5
    assert mock.calls(base)["calls"] == 995 + 60  # each failed call retried once, by the config's retry


def test_provider_run_batches_are_forwarded(openai_client, mock):
    base = mock.scenario()
    client = openai_client(base + "/v1")
    file_id = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(3))), purpose="batch").id
    batch = client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h",
                                  metadata={"k": "v"})
    assert batch.id.startswith("batch_") and not batch.id.startswith("batch_gw_")
    done = wait_status(client, batch.id, ("completed",), timeout=20)
    output = [msgspec.json.decode(x) for x in client.files.content(done.output_file_id).content.splitlines()]
    assert [x["custom_id"] for x in output] == ["req-1", "req-2", "req-3"]
    assert batch.id in [b.id for b in client.batches.list(limit=100).data]
    other = client.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    assert client.batches.cancel(other.id).status == "cancelling"
    assert wait_status(client, other.id, ("cancelled",), timeout=20).cancelled_at
    with pytest.raises(NotFoundError):
        client.batches.retrieve("batch_unknown")
    paths = {c["path"] for c in mock.calls(base)["requests"]}
    assert {"/v1/files", "/v1/batches", f"/v1/batches/{batch.id}", f"/v1/batches/{other.id}/cancel"} <= paths


def test_the_input_file_of_a_running_batch_cannot_be_deleted(plain, openai_client, mock):
    runner = openai_client(mock.scenario([{"delay_ms": 100}]) + "/v1")
    file_id = gateway_file(plain, jsonl(40))
    batch = runner.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="immediate")
    with pytest.raises(ConflictError) as caught:
        plain.files.delete(file_id)
    assert batch.id in caught.value.message
    plain.batches.cancel(batch.id)
    wait_status(plain, batch.id, ("cancelled",))
    assert plain.files.delete(file_id).deleted


def test_a_gateway_run_batch_uses_the_slug_of_its_workspace(gateway, mock):
    """A batch created with a provider slug resolves it in the creating key's workspace; another workspace's key
    naming that slug gets 400 (unknown slug) and nothing is sent."""
    from tests.support.controlplane import api, create_key

    owner, stranger = create_key(gateway), create_key(gateway)
    base = mock.scenario()
    slug = {"slug": "batch-slug", "provider": "vendorA", "api_key": "sk-batch-slug-0123456789",
            "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, owner["key"]).status == 201
    own = OpenAI(base_url=f"{gateway.url}/v1", api_key=owner["key"], max_retries=0, timeout=60,
                 http_client=gateway.http_client())
    runner = OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=60,
                    default_headers={"x-gateway-api-key": owner["key"], "x-gateway-provider": "@batch-slug"},
                    http_client=gateway.http_client())
    batch = runner.batches.create(input_file_id=gateway_file(own, jsonl(3)), endpoint=CHAT,
                                  completion_window="immediate")
    done = wait_status(own, batch.id, ("completed", "failed"))
    assert (done.status, done.request_counts.completed) == ("completed", 3), done
    assert mock.calls(base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-batch-slug-0123456789"
    theirs = OpenAI(base_url=f"{gateway.url}/v1", api_key=stranger["key"], max_retries=0, timeout=60,
                    http_client=gateway.http_client())
    for headers, param in (({"x-gateway-provider": "@batch-slug"}, "x-gateway-provider"),
                           ({"x-gateway-config": '{"provider": "@batch-slug"}'}, "provider")):
        with pytest.raises(BadRequestError) as caught:
            theirs.batches.create(input_file_id=gateway_file(theirs, jsonl(1)), endpoint=CHAT,
                                  completion_window="immediate", extra_headers=headers)
        assert caught.value.param == param and "@batch-slug" in caught.value.body["message"]
    assert mock.calls(base)["calls"] == 3


def test_a_batch_runs_as_its_key_by_id_through_rotation_and_stops_when_the_key_is_revoked(mock):
    """A gateway-run batch keeps no gateway key secret: it runs as the key that created it (by id), so rotating
    the key mid-run changes nothing, and revoking it stops the batch, each remaining line failing with
    ``key_revoked``."""
    import tempfile
    from pathlib import Path

    from tests.support.controlplane import api, create_key
    from tests.support.inprocess import start_in_process

    data_dir = tempfile.mkdtemp(prefix="gw-batch-keys-")
    server = start_in_process({"GATEWAY_BATCH_CONCURRENCY": "2", "GATEWAY_BATCH_POLL_MS": "100"}, data_dir=data_dir)
    try:
        creator = create_key(server, role="member")
        reader = create_key(server, workspace=creator["workspace_id"])
        watch = OpenAI(base_url=f"{server.url}/v1", api_key=reader["key"], max_retries=0, timeout=60,
                       http_client=server.http_client())
        base = mock.scenario([{"delay_ms": 60}])
        headers = {"x-gateway-api-key": creator["key"], "x-gateway-provider": "vendorA",
                   "x-gateway-custom-host": base + "/v1"}

        def start(lines: int) -> str:
            client = OpenAI(base_url=f"{server.url}/v1", api_key="sk-provider", max_retries=0, timeout=60,
                            http_client=server.http_client(),
                            default_headers=headers)
            batch = client.batches.create(input_file_id=gateway_file(watch, jsonl(lines)), endpoint=CHAT,
                                          completion_window="immediate")
            deadline = time.monotonic() + 60
            while watch.batches.retrieve(batch.id).request_counts.completed < 4:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            return batch.id

        first = start(40)
        rotated = api(server, "POST", f"/v1/api-keys/{creator['id']}/rotate", key=reader["key"])
        assert rotated.status == 200, rotated.text
        done = wait_status(watch, first, ("completed", "failed"))
        assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 40, 0)
        stored = b"".join(p.read_bytes() for p in Path(data_dir).glob("state.db*"))
        assert first.encode() in stored
        assert creator["key"].encode() not in stored and rotated.json()["key"].encode() not in stored

        headers["x-gateway-api-key"] = rotated.json()["key"]
        second = start(200)
        assert api(server, "DELETE", f"/v1/api-keys/{creator['id']}", key=reader["key"]).status == 200
        done = wait_status(watch, second, ("completed", "failed"))
        assert done.status == "failed" and done.failed_at
        assert 4 <= done.request_counts.completed < 200 and done.request_counts.failed == 0
        assert any(e.code == "key_revoked" for e in done.errors.data)
        errors = read_jsonl(watch, done.error_file_id)  # as for a cancelled batch: lines that never ran
        assert len(errors) == 200 - done.request_counts.completed
        assert {e["error"]["code"] for e in errors} == {"key_revoked"}
        assert creator["id"] in errors[0]["error"]["message"]
        assert len(read_jsonl(watch, done.output_file_id)) == done.request_counts.completed
    finally:
        server.stop()


def test_lines_past_an_exhausted_usage_limit_end_as_error_lines_and_the_batch_completes(gateway, plain,
                                                                                        openai_client, mock):
    """A usage limit does not reset within a batch (cumulative here): each line it refuses is answered at once with
    its 429 as an error line, written once; the others run; the batch completes instead of waiting forever."""
    run = tag()
    usage_limit(gateway, run, "requests", 3)
    base = mock.scenario()
    runner = openai_client(base + "/v1", **{"x-gateway-metadata": msgspec.json.encode({"run": run}).decode()})
    file_id = gateway_file(plain, jsonl(8))
    created = runner.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="immediate")
    done = wait_status(plain, created.id, ("completed", "failed", "expired"), timeout=60)
    assert done.status == "completed"
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (8, 3, 5)
    output, errors = read_jsonl(plain, done.output_file_id), read_jsonl(plain, done.error_file_id)
    assert len(output) == 3 and len(errors) == 5
    assert sorted(line["custom_id"] for line in output + errors) == sorted(f"req-{i}" for i in range(1, 9))
    for line in errors:
        assert line["response"]["status_code"] == 429
        error = line["response"]["body"]["error"]
        assert error["code"] == "usage_limit_exceeded" and error["type"] == "insufficient_quota"
        assert f"usage {run}" in error["message"]
    assert mock.calls(base)["calls"] == 3


def _raw_state(state: str, data_dir: str, redis_env: dict[str, str]) -> bytes:
    """Everything the state store holds, as raw bytes: the embedded store's files, or every value under the
    gateway's Redis key prefix (read by type, so nothing is compressed as DUMP would)."""
    from pathlib import Path

    if state == "embedded":
        return b"".join(p.read_bytes() for p in Path(data_dir).glob("*.db*"))
    import redis

    client = redis.Redis.from_url(redis_env["GATEWAY_REDIS_URL"])
    parts: list[bytes] = []
    try:
        for key in client.scan_iter(match=redis_env["GATEWAY_REDIS_KEY_PREFIX"] + "*", count=500):
            kind = client.type(key)
            parts.append(key)
            if kind == b"string":
                parts.append(client.get(key) or b"")
            elif kind == b"hash":
                parts.extend(b"%s=%s" % pair for pair in client.hgetall(key).items())
            elif kind == b"set":
                parts.extend(client.smembers(key))
            elif kind == b"zset":
                parts.extend(client.zrange(key, 0, -1))
            elif kind == b"list":
                parts.extend(client.lrange(key, 0, -1))
            elif kind == b"stream":
                parts.extend(repr(entry).encode() for entry in client.xrange(key))
    finally:
        client.close()
    assert parts, "the gateway wrote nothing under its prefix"
    return b"\n".join(parts)


@pytest.mark.parametrize("state", ["embedded", "redis"])
def test_a_batchs_provider_secrets_are_sealed_in_the_state_store(mock, request, state):
    """The provider bearer and an x-gateway-config api_key a batch's lines are sent with never sit in the state
    store in plain text, nor in the batch as the API shows it; the lines still reach the provider with them."""
    import tempfile
    import uuid

    from tests.support.inprocess import start_in_process

    redis_env: dict[str, str] = request.getfixturevalue("shared_redis") if state == "redis" else {}
    data_dir = tempfile.mkdtemp(prefix="gw-batch-sealed-")
    server = start_in_process({"GATEWAY_BATCH_POLL_MS": "100", **redis_env}, data_dir=data_dir)
    bearer, config_key = f"sk-bearer-{uuid.uuid4().hex}", f"sk-config-{uuid.uuid4().hex}"
    try:
        base = mock.scenario()
        watch = OpenAI(base_url=f"{server.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60,
                       http_client=server.http_client())
        config = {"provider": "vendorA", "api_key": config_key, "custom_host": base + "/v1"}
        runner = OpenAI(base_url=f"{server.url}/v1", api_key=bearer, max_retries=0, timeout=60,
                        http_client=server.http_client(), default_headers={
            "x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode()})
        created = runner.batches.create(input_file_id=gateway_file(watch, jsonl(3)), endpoint=CHAT,
                                        completion_window="immediate")
        done = wait_status(watch, created.id, ("completed", "failed"))
        assert (done.status, done.request_counts.completed) == ("completed", 3), done.errors
        sent = mock.calls(base)["requests"]
        assert len(sent) == 3 and all(config_key in r["headers"].get("authorization", "") for r in sent)
        shown = (watch.batches.retrieve(created.id).model_dump_json() + watch.batches.list().model_dump_json()
                 + runner.batches.retrieve(created.id).model_dump_json())
        stored = _raw_state(state, data_dir, redis_env)
        assert created.id.encode() in stored
        for secret in (bearer, config_key):
            assert secret not in shown
            assert secret.encode() not in stored, f"{secret} is stored in plain text"
    finally:
        server.stop()


def test_a_batch_resumed_under_another_secret_key_fails_naming_the_key(mock, tmp_path):
    """A gateway started again with another GATEWAY_SECRET_KEY cannot open the headers of the batch it resumes:
    the batch ends failed with headers_unreadable (no line is sent without its headers), keeping the answered
    lines."""
    from tests.support.processes import kill_tree
    from tests.support.servers import start_gateway

    env = {"GATEWAY_BATCH_CONCURRENCY": "2", "GATEWAY_BATCH_POLL_MS": "100", "GATEWAY_BATCH_LEASE_MS": "1000"}
    data_dir = str(tmp_path / "data")
    base = mock.scenario([{"delay_ms": 100}])
    first = start_gateway({**env, "GATEWAY_SECRET_KEY": "the-first-secret-key"}, data_dir=data_dir)
    try:
        watch = OpenAI(base_url=f"{first.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60)
        runner = OpenAI(base_url=f"{first.url}/v1", api_key="sk-up", max_retries=0, timeout=60, default_headers={
            "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": base + "/v1"})
        batch_id = runner.batches.create(input_file_id=gateway_file(watch, jsonl(40)), endpoint=CHAT,
                                         completion_window="immediate").id
        deadline = time.monotonic() + 60
        while watch.batches.retrieve(batch_id).request_counts.completed < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        kill_tree(first.proc.pid)
        first.proc.wait(10)
    sent = mock.calls(base)["calls"]
    assert sent < 40, "the batch finished before the kill; make the mock slower"
    second = start_gateway({**env, "GATEWAY_SECRET_KEY": "another-secret-key"}, data_dir=data_dir)
    try:
        watch = OpenAI(base_url=f"{second.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60)
        done = wait_status(watch, batch_id, ("completed", "failed", "cancelled", "expired"))
        assert done.status == "failed" and done.errors.data[-1].code == "headers_unreadable"
        assert "another secret key" in done.errors.data[-1].message
        assert mock.calls(base)["calls"] <= sent + 2  # none sent after the restart (two were in flight at most)
        answered = read_jsonl(watch, done.output_file_id)
        errors = read_jsonl(watch, done.error_file_id)
        assert len(answered) == done.request_counts.completed >= 2 and len(answered) + len(errors) == 40
        assert {e["error"]["code"] for e in errors} == {"headers_unreadable"}
    finally:
        second.stop()
