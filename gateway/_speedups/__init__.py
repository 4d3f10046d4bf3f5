"""The one place that picks compiled (Cython) or pure-Python implementations of the hot code.

Each compiled module ``gateway._speedups.<name>`` (built from ``_speedups/<name>.pyx``) has a pure-Python
twin in the package that owns the behaviour (``TWINS``, which a test ties to the sources setup.py builds). The
compiled one is used unless the setting ``no_extensions`` (``GATEWAY_NO_EXTENSIONS``, ``--no-extensions``) is on or
the extension is missing or stale (each compiled module checks, as it loads, that its public names and shared
constants are its pure twin's, and raises ImportError otherwise). ``ACTIVE`` says which was picked (``/health``
shows it).

Use: ``from gateway import _speedups; _speedups.sse.SseSplitter``. Modules are picked lazily, on first use, so the
setting reaches this module before anything is picked: a gateway worker calls ``configure(settings.no_extensions)``
at startup, before it serves. A process that never calls ``configure`` (a script, the test process) follows the
environment, read through ``gateway.settings.load``, at its first pick.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: name -> pure-Python twin module (one entry per ``_speedups/<name>.pyx``)
TWINS: dict[str, str] = {
    "sse": "gateway.http.sse",
    "conditions": "gateway.routing.conditions",
    "similarity": "gateway.cache.similarity",
    "recordrow": "gateway.observability.recordrow",
    "context": "gateway.http.context",
}

#: name -> "compiled" or "pure", filled as modules are picked
ACTIVE: dict[str, str] = {}
_no_extensions: bool | None = None


def configure(no_extensions: bool) -> None:
    """Decide compiled or pure for this process; forgets earlier picks (later uses pick again)."""
    global _no_extensions
    _no_extensions = no_extensions
    for name in list(ACTIVE):
        globals().pop(name, None)
    ACTIVE.clear()


def no_extensions() -> bool:
    """True when this process uses the pure twins on purpose."""
    if _no_extensions is None:
        from gateway.settings import load

        configure(load().no_extensions)
    assert _no_extensions is not None
    return _no_extensions


def compiled(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when it is not built (or is stale)."""
    try:
        return importlib.import_module(f"gateway._speedups.{name}")
    except ImportError:
        return None


def pure(name: str) -> ModuleType:
    """The pure-Python twin of ``name``."""
    return importlib.import_module(TWINS[name])


def pick(name: str) -> ModuleType:
    """The implementation of ``name`` in use: compiled when allowed and built, else pure."""
    module = None if no_extensions() else compiled(name)
    if module is None:
        module = pure(name)
        ACTIVE[name] = "pure"
    else:
        ACTIVE[name] = "compiled"
    globals()[name] = module
    return module


def active() -> dict[str, str]:
    """Which implementation each twin uses (picks every twin so the answer is complete)."""
    for name in TWINS:
        if name not in ACTIVE:
            pick(name)
    return dict(ACTIVE)


def __getattr__(name: str) -> ModuleType:
    if name in TWINS:
        return pick(name)
    raise AttributeError(name)
