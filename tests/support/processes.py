"""What /proc says about a server's process tree (Granian runs its workers as child processes): the pids, their
peak memory, and a hard kill of them all (SIGKILL, as a crash would)."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    pids = [pid]
    for child in children(pid):
        pids.extend(tree(child))
    return pids


def peak_rss_kb(pid: int) -> int:
    """The largest resident size (VmHWM) any process of the tree reached."""
    peak = 0
    for each in tree(pid):
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return peak


def kill_tree(pid: int) -> None:
    """SIGKILL every process of the tree at once (children first, so none is re-spawned)."""
    for each in reversed(tree(pid)):
        try:
            os.kill(each, signal.SIGKILL)
        except ProcessLookupError:
            pass
