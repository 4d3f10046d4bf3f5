"""One start/stop shape (gateway/lifecycle.py): services start in the order added and close in the reverse order;
a start that fails closes what had started, and a close that fails does not keep the others open. A worker's
runtime is built on it: a start that fails part way leaves nothing of the worker open."""

from __future__ import annotations

import pytest

from gateway.api.logstream import LogStreamEndpoint
from gateway.app import GatewayApp
from gateway.lifecycle import Lifecycle, Stage
from gateway.observability.logtail import Subscriber
from gateway.observability.sqlitelog import SqliteLogs
from gateway.runtime import Runtime
from gateway.settings import load


class Part:
    def __init__(self, name: str, seen: list[str], fail_start: bool = False, fail_close: bool = False) -> None:
        self.name, self.seen, self.fail_start, self.fail_close = name, seen, fail_start, fail_close

    async def start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.seen.append(f"start {self.name}")

    async def close(self) -> None:
        self.seen.append(f"close {self.name}")
        if self.fail_close:
            raise RuntimeError(f"{self.name} cannot close")


async def test_services_close_in_the_reverse_order_they_started():
    seen: list[str] = []
    lifecycle = Lifecycle()
    for part in (Part("store", seen), Stage("sync", start=lambda: seen.append("start sync"),
                                            close=lambda: seen.append("close sync")), Part("recorder", seen)):
        lifecycle.add(part)
    await lifecycle.start()
    await lifecycle.close()
    assert seen == ["start store", "start sync", "start recorder", "close recorder", "close sync", "close store"]
    await lifecycle.close()  # closing again closes nothing twice
    assert len(seen) == 6


async def test_a_start_that_fails_closes_what_had_started_and_raises():
    seen: list[str] = []
    lifecycle = Lifecycle()
    for part in (Part("store", seen), Part("client", seen), Part("recorder", seen, fail_start=True),
                 Part("scheduler", seen)):
        lifecycle.add(part)
    with pytest.raises(RuntimeError, match="recorder cannot start"):
        await lifecycle.start()
    assert seen == ["start store", "start client", "close client", "close store"]


async def test_a_close_that_fails_is_logged_and_the_others_still_close(caplog):
    seen: list[str] = []
    lifecycle = Lifecycle()
    for part in (Part("store", seen), Part("client", seen, fail_close=True), Part("recorder", seen)):
        lifecycle.add(part)
    await lifecycle.start()
    await lifecycle.close()
    assert seen[3:] == ["close recorder", "close client", "close store"]
    assert "closing" in caplog.text and "client cannot close" in caplog.text


class UnopenableLogs(SqliteLogs):
    async def open(self) -> None:
        raise OSError("the log store cannot be opened")


async def test_a_worker_whose_start_fails_part_way_leaves_nothing_open(tmp_path):
    settings = load({"GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_LOG_FILE": "off"})
    runtime = Runtime(settings, logs=UnopenableLogs.for_settings(settings))
    with pytest.raises(OSError, match="cannot be opened"):
        await runtime.start()
    assert not runtime.ready
    assert runtime.client.session is None  # started before the recorder, closed again
    assert runtime.watcher._task is None


async def test_a_service_added_after_the_start_is_refused_rather_than_never_started():
    seen: list[str] = []
    lifecycle = Lifecycle()
    lifecycle.add(Part("store", seen))
    await lifecycle.start()
    with pytest.raises(RuntimeError, match="has started"):
        lifecycle.add(Part("late", seen))
    await lifecycle.close()
    assert seen == ["start store", "close store"]


async def test_the_services_the_routes_mount_join_the_runtimes_lifecycle_and_close_first(tmp_path):
    settings = load({"GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_LOG_FILE": "off"})
    runtime = Runtime(settings)
    app = GatewayApp(runtime)
    planned = runtime.lifecycle._planned
    assert app.body_watch in planned
    mounted = [planned.index(app.body_watch), *(i for i, part in enumerate(planned) if type(part).__name__ == "Jobs")]
    assert len(mounted) == 2 and min(mounted) > planned.index(runtime.recorder) > planned.index(runtime.store)
    await runtime.start()
    await runtime.close()
    assert runtime.lifecycle._started == []


async def test_the_log_streams_tail_closes_with_the_worker(tmp_path):
    settings = load({"GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_LOG_FILE": "off", "GATEWAY_CONSOLE": "1"})
    runtime = Runtime(settings)
    GatewayApp(runtime)
    [stream] = [part for part in runtime.lifecycle._planned if isinstance(part, LogStreamEndpoint)]
    await runtime.start()
    try:
        tail = stream._tail()
        await tail.subscribe(Subscriber(("every",), lambda row, model_of: True))  # a console connected
        assert tail._poller.running
    finally:
        await runtime.close()
    assert not tail._poller.running and tail._poller.closed and not tail.subscribers
