"""The request-log line sink: every worker writes to the same stdout or file, so no line may be split by another
worker's. To a regular file a batch goes in one write; to a pipe in writes of whole lines within PIPE_BUF."""

from __future__ import annotations

import os
import threading

import pytest

from gateway.observability import linesink
from gateway.observability.linesink import LineSink


def lines_of(prefix: str, count: int) -> list[bytes]:
    return [f'{{"worker":"{prefix}","n":{i},"pad":"{"x" * (40 + i * 37 % 900)}"}}'.encode() for i in range(count)]


class _CountingOs:
    """The ``os`` module as the line sink sees it, counting the size of every write it makes."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def __getattr__(self, name: str):
        return getattr(os, name)

    def write(self, fd: int, data) -> int:
        self.sizes.append(len(data))
        return os.write(fd, data)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every write the sinks make (and no one else's in this process)."""
    sizes: list[int] = []
    monkeypatch.setattr(linesink, "os", _CountingOs(sizes))
    return sizes


def test_to_a_file_a_batch_is_one_write_and_workers_never_split_a_line(tmp_path, writes):
    path = tmp_path / "requests.log"
    sinks = [LineSink(str(path)) for _ in range(4)]
    batches = {f"w{k}": lines_of(f"w{k}", 120) for k in range(4)}  # each batch far over PIPE_BUF

    def worker(sink: LineSink, name: str) -> None:
        for _ in range(5):
            sink.write(batches[name])

    threads = [threading.Thread(target=worker, args=(sink, name)) for sink, name in zip(sinks, batches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for sink in sinks:
        sink.close()
    assert len(writes) == 20  # one write per batch
    written = path.read_bytes().split(b"\n")
    assert written[-1] == b""
    expected = sorted(line for batch in batches.values() for line in batch for _ in range(5))
    assert sorted(written[:-1]) == expected  # every line whole, none lost, none merged with another


def test_to_a_pipe_writes_are_whole_lines_within_pipe_buf(writes):
    read_end, write_end = os.pipe()
    received = bytearray()
    reader = threading.Thread(target=_drain, args=(read_end, received))
    reader.start()
    saved = os.dup(1)
    os.dup2(write_end, 1)  # the default target, stdout, is a pipe (a container's log driver)
    try:
        sink = LineSink(None)
        batch = lines_of("w", 200)
        sink.write(batch)
        sink.close()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(write_end)
    reader.join(30)
    os.close(read_end)
    assert len(writes) > 1 and all(size <= 4096 for size in writes)
    assert bytes(received) == b"\n".join(batch) + b"\n"


def _drain(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 65536):
        into.extend(chunk)
