"""Exactness across processes: several processes each make N concurrent reserves against one counter, starting
at an agreed time; ``admitted_across_processes`` sums what they admitted.

Each process runs ``python -m tests.support.state_race '<json>'`` with backend (embedded: dir; redis: url,
prefix), scope, key, limit, n and start_at (epoch seconds) and prints how many were admitted.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from gateway.state.base import BudgetItem, StateStore

ROOT = Path(__file__).resolve().parents[2]


def open_store(spec: dict) -> StateStore:
    if spec["backend"] == "embedded":
        from gateway.state.sqlite import SQLiteStateStore

        return SQLiteStateStore(spec["dir"] + "/state.db", spec["dir"] + "/cache.db", busy_timeout_ms=10_000)
    from gateway.state.redis import RedisStateStore

    return RedisStateStore(spec["url"], key_prefix=spec["prefix"], timeout_ms=10_000)


async def race(spec: dict) -> int:
    store = open_store(spec)
    await store.start()
    try:
        item = BudgetItem(spec["key"], spec["limit"], 1, 600_000)
        await asyncio.sleep(max(0.0, spec["start_at"] - time.time()))
        answers = await asyncio.gather(*(store.reserve(spec["scope"], [item]) for _ in range(spec["n"])))
        return sum(a.admitted for a in answers)
    finally:
        await store.close()


def admitted_across_processes(spec: dict, processes: int = 2, timeout: float = 120.0) -> int:
    spec = dict(spec, start_at=time.time() + 3.0)  # every process has started and connected by then
    procs = [subprocess.Popen([sys.executable, "-m", "tests.support.state_race", msgspec.json.encode(spec).decode()],
                              cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(processes)]
    total = 0
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        total += int(out.strip())
    return total


if __name__ == "__main__":
    print(asyncio.run(race(msgspec.json.decode(sys.argv[1]))))
