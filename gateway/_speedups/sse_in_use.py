"""The SSE splitter and encoders in use: the compiled twin (``gateway._speedups.sse``) unless ``NO_EXTENSIONS`` is on
or it is not built or stale, else the pure one (``gateway.http.sse``). Chosen once, at import."""

from __future__ import annotations

from gateway._speedups import NO_EXTENSIONS
from gateway.http.sse import SseSplitter as SseSplitterPy
from gateway.http.sse import encode_event as encode_event_py
from gateway.http.sse import is_done as is_done_py
from gateway.http.sse import scan_relay as scan_relay_py

SseSplitter: type[SseSplitterPy] = SseSplitterPy
encode_event = encode_event_py
is_done = is_done_py
scan_relay = scan_relay_py
#: "compiled" or "pure"
IMPLEMENTATION = "pure"

if not NO_EXTENSIONS:
    try:
        from gateway._speedups.sse import SseSplitter as SseSplitterC
        from gateway._speedups.sse import encode_event as encode_event_c
        from gateway._speedups.sse import is_done as is_done_c
        from gateway._speedups.sse import scan_relay as scan_relay_c
    except ImportError:  # not built, or built from older sources (it refuses to load)
        pass
    else:
        SseSplitter, encode_event, is_done, scan_relay = SseSplitterC, encode_event_c, is_done_c, scan_relay_c
        IMPLEMENTATION = "compiled"
