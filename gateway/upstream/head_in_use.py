"""The request-head writer in use: the compiled twin (``gateway._speedups.head``) unless ``NO_EXTENSIONS`` is on or it
is not built or stale, else the pure one (``gateway.upstream.head``). Chosen once, at import."""

from __future__ import annotations

from gateway._speedups import NO_EXTENSIONS
from gateway.upstream.head import request_head as request_head_py

request_head = request_head_py
#: "compiled" or "pure"
IMPLEMENTATION = "pure"

if not NO_EXTENSIONS:
    try:
        from gateway._speedups.head import request_head as request_head_c
    except ImportError:  # not built, or built from older sources (it refuses to load)
        pass
    else:
        request_head = request_head_c
        IMPLEMENTATION = "compiled"
