"""Headers to a RequestContext, as in use: the compiled twin (``gateway._speedups.context``) unless
``NO_EXTENSIONS`` is on or it is not built or stale, else the pure one (``gateway.http.context``). Chosen once, at
import."""

from __future__ import annotations

from gateway._speedups import NO_EXTENSIONS
from gateway.http.context import build_context as build_context_py

build_context = build_context_py
#: "compiled" or "pure"
IMPLEMENTATION = "pure"

if not NO_EXTENSIONS:
    try:
        from gateway._speedups.context import build_context as build_context_c
    except ImportError:  # not built, or built from older sources (it refuses to load)
        pass
    else:
        build_context = build_context_c
        IMPLEMENTATION = "compiled"
