"""The one place that picks compiled (Cython) or pure-Python implementations of the hot code.

Each compiled module ``gateway._speedups.<name>`` (built from ``_speedups/<name>.pyx``) has a pure-Python
twin in the package that owns the behaviour. The compiled one is used unless ``GATEWAY_NO_EXTENSIONS`` is
true or the extension is missing. ``ACTIVE`` says which was picked (``/health`` shows it).

Use: ``from gateway import _speedups; _speedups.sse.SseSplitter``. Modules are picked lazily, on first use.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: name -> pure-Python twin module
TWINS: dict[str, str] = {
    "sse": "gateway.http.sse",
    "conditions": "gateway.routing.conditions",
    "similarity": "gateway.cache.similarity",
}

_TRUE = {"1", "true", "yes", "on"}
NO_EXTENSIONS: bool = os.environ.get("GATEWAY_NO_EXTENSIONS", "").strip().lower() in _TRUE

#: name -> "compiled" or "pure", filled as modules are picked
ACTIVE: dict[str, str] = {}


def compiled(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when it is not built."""
    try:
        return importlib.import_module(f"gateway._speedups.{name}")
    except ImportError:
        return None


def pure(name: str) -> ModuleType:
    """The pure-Python twin of ``name``."""
    return importlib.import_module(TWINS[name])


def pick(name: str) -> ModuleType:
    """The implementation of ``name`` in use: compiled when allowed and built, else pure."""
    module = None if NO_EXTENSIONS else compiled(name)
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
            try:
                pick(name)
            except ImportError:
                ACTIVE[name] = "missing"
    return dict(ACTIVE)


def __getattr__(name: str) -> ModuleType:
    if name in TWINS:
        return pick(name)
    raise AttributeError(name)
