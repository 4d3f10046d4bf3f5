"""The Prometheus multiprocess directory: made fresh by ``gateway serve`` before workers start, removed at exit.

Kept apart from ``metrics.py`` on purpose: ``PROMETHEUS_MULTIPROC_DIR`` must be in the environment before
prometheus_client is first imported in a worker, so the serving process must not import it. That variable is
prometheus_client's own contract (the library reads it), not a gateway setting: this module is the one place of the
gateway that reads or writes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"
_PREFIX = "serve-"


def directory() -> str | None:
    """The multiprocess directory this process's metrics live in (None: a single process, no directory)."""
    return os.environ.get(ENV) or None


def prepare(base: Path) -> tuple[str, bool]:
    """Export a multiprocess directory for the workers: the operator's ``PROMETHEUS_MULTIPROC_DIR`` when set
    (used as is), else a fresh one under ``base``. Returns (path, owned): owned directories are ours to remove."""
    existing = os.environ.get(ENV)
    if existing:
        os.makedirs(existing, exist_ok=True)
        return existing, False
    base.mkdir(parents=True, exist_ok=True)
    remove_stale(base)
    path = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)
    os.environ[ENV] = path
    return path, True


def remove_stale(base: Path) -> None:
    """Remove directories left by servers that are no longer running (their pid is in the name)."""
    for entry in base.glob(f"{_PREFIX}*"):
        try:
            pid = int(entry.name[len(_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(entry, ignore_errors=True)


def remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
