"""The live tail behind ``/v1/logs/stream``: rows written to the store reach matching subscribers as SSE frames,
bounded per subscriber (older frames dropped and counted), one match pass per distinct filter, no poller without
subscribers."""

from __future__ import annotations

import asyncio
import time

import msgspec

from gateway.observability.logstore import LogFilter, LogStore
from gateway.observability.logtail import MAX_BUFFER_BYTES, MAX_FRAMES, LogTail, Subscriber, event_frame, row_matcher
from gateway.waiting import within


def doc(**fields) -> bytes:
    return msgspec.json.encode({"trace_id": "t", "model": "gpt-4o-mini", **fields})


def row(row_id: int, status: int = 200, provider: str = "vendorA", workspace: str = "default", trace: str = "t",
        model: str = "gpt-4o-mini", ts: float = 1000.0, size: int = 0) -> tuple:
    return (row_id, ts, workspace, trace, status, provider, doc(model=model, pad="x" * size))


def frames_of(data: bytes) -> list[dict]:
    out = []
    for block in data.split(b"\n\n"):
        lines = dict(line.split(b": ", 1) for line in block.split(b"\n") if b": " in line)
        if lines.get(b"event") == b"log":
            out.append(msgspec.json.decode(lines[b"data"]))
    return out


def subscriber(flt: LogFilter | None = None, workspace: str | None = "default", every: bool = False) -> Subscriber:
    flt = flt or LogFilter()
    return Subscriber((workspace, every, flt), row_matcher(flt, workspace, every))


def test_a_frame_is_the_logs_item_with_its_id():
    frame = event_frame(42, doc(status=200))
    assert frame.startswith(b"id: 42\nevent: log\ndata: ") and frame.endswith(b"\n\n")
    assert frames_of(frame) == [{"id": "42", "trace_id": "t", "model": "gpt-4o-mini", "status": 200}]


async def test_filters_pick_rows_by_workspace_status_provider_model_trace_and_time():
    tail = LogTail(":memory:")
    cases = {
        "workspace": (subscriber(), [1, 2, 3, 4, 5, 7]),
        "every workspace": (subscriber(workspace=None, every=True), [1, 2, 3, 4, 5, 6, 7]),
        "5xx": (subscriber(LogFilter(status_class=5)), [2]),
        "429": (subscriber(LogFilter(status=429)), [3]),
        "provider": (subscriber(LogFilter(provider="anthropic")), [4]),
        "model": (subscriber(LogFilter(model="other")), [5]),
        "trace": (subscriber(LogFilter(trace_id="needle")), [7]),
        "time": (subscriber(LogFilter(since=1500.0, until=2500.0)), [7]),
    }
    for sub, _ in cases.values():
        tail.subscribers.add(sub)
    tail.fan_out([row(1), row(2, status=503), row(3, status=429), row(4, provider="anthropic"),
                  row(5, model="other"), row(6, workspace="other"), row(7, trace="needle", ts=2000.0)])
    for name, (sub, ids) in cases.items():
        assert [int(item["id"]) for item in frames_of(sub.take())] == ids, name


async def test_a_subscriber_that_falls_behind_keeps_the_newest_frames_and_says_how_many_it_missed():
    tail = LogTail(":memory:")
    sub = subscriber()
    tail.subscribers.add(sub)
    for start in range(0, 3 * MAX_FRAMES, 5):
        tail.fan_out([row(i) for i in range(start + 1, min(start + 6, 3 * MAX_FRAMES + 1))])
    data = sub.take()
    ids = [int(item["id"]) for item in frames_of(data)]
    assert ids == list(range(2 * MAX_FRAMES + 1, 3 * MAX_FRAMES + 1))
    assert data.startswith(b'event: skipped\ndata: {"skipped":%d}\n\n' % (2 * MAX_FRAMES))
    assert sub.take() == b"" and sub.size == 0


async def test_buffers_are_bounded_in_bytes_too():
    tail = LogTail(":memory:")
    sub = subscriber()
    tail.subscribers.add(sub)
    big = MAX_BUFFER_BYTES // 8
    tail.fan_out([row(i, size=big) for i in range(1, 21)])
    assert sub.size <= MAX_BUFFER_BYTES
    assert [int(item["id"]) for item in frames_of(sub.take())][-1] == 20


async def test_subscribers_with_the_same_filter_share_one_match_pass_and_the_same_bytes():
    tail = LogTail(":memory:")
    calls = []
    flt = LogFilter(status_class=2)
    match = row_matcher(flt, "default", False)

    def counting(r, model_of):
        calls.append(r[0])
        return match(r, model_of)

    subs = [Subscriber(("same",), counting) for _ in range(100)]
    tail.subscribers.update(subs)
    tail.fan_out([row(1), row(2, status=500), row(3)])
    assert len(calls) == 3  # not 300
    frames = [sub.frames[0][1] for sub in subs]
    assert all(frame is frames[0] for frame in frames)


async def test_the_backlog_and_live_rows_meet_without_duplicates():
    tail = LogTail(":memory:")
    sub = subscriber()
    tail.subscribers.add(sub)
    tail.fan_out([row(1), row(2), row(3)])
    sub.skip_through(2)  # rows 1 and 2 went out as the backlog
    tail.fan_out([row(2), row(4)])
    assert [int(item["id"]) for item in frames_of(sub.take())] == [3, 4]


async def test_the_tail_reads_rows_written_by_the_store_and_stops_without_subscribers(tmp_path):
    store = LogStore(str(tmp_path / "logs.db"))
    store.insert([(time.time(), "default", "old", 200, "vendorA", "gpt-4o-mini", doc())])
    tail = LogTail(store.path, interval_s=0.05)
    sub = subscriber()
    await tail.subscribe(sub)
    store.insert([(time.time(), "default", f"t{i}", 200, "vendorA", "gpt-4o-mini", doc(trace_id=f"t{i}"))
                  for i in range(3)])
    deadline = time.monotonic() + 5
    got: list[dict] = []
    while len(got) < 3 and time.monotonic() < deadline:
        await within(sub.wake.wait(), 5)
        sub.wake.clear()
        got += frames_of(sub.take())
    assert [item["trace_id"] for item in got] == ["t0", "t1", "t2"]  # not the row written before subscribing
    tail.unsubscribe(sub)
    deadline = time.monotonic() + 5
    while tail._poller.running and time.monotonic() < deadline:  # noqa: ASYNC110 - waits for a task to end
        await asyncio.sleep(0.05)
    assert not tail._poller.running and tail._conn is None
    await tail.subscribe(sub)  # a later subscriber starts it again, from the newest row
    store.insert([(time.time(), "default", "again", 200, "vendorA", "gpt-4o-mini", doc(trace_id="again"))])
    await within(sub.wake.wait(), 5)
    assert [item["trace_id"] for item in frames_of(sub.take())] == ["again"]
    await tail.close()
    store.close()


async def test_a_read_that_finds_too_many_rows_skips_the_oldest(tmp_path):
    store = LogStore(str(tmp_path / "logs.db"))
    tail = LogTail(store.path, interval_s=0.05, max_rows=10)
    sub = subscriber()
    await tail.subscribe(sub)
    store.insert([(time.time(), "default", f"t{i}", 200, "vendorA", "gpt-4o-mini", doc(trace_id=f"t{i}"))
                  for i in range(25)])
    await within(sub.wake.wait(), 5)
    data = sub.take()
    assert data.startswith(b'event: skipped\ndata: {"skipped":15}\n\n')
    assert [item["trace_id"] for item in frames_of(data)] == [f"t{i}" for i in range(15, 25)]
    await tail.close()
    store.close()
