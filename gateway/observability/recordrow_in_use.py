"""Record rows in use: the compiled twin (``gateway._speedups.recordrow``) unless ``NO_EXTENSIONS`` is on or it is
not built or stale, else the pure one (``gateway.observability.recordrow``). Chosen once, at import."""

from __future__ import annotations

from gateway._speedups import NO_EXTENSIONS
from gateway.observability.recordrow import RecordRows as RecordRowsPy

RecordRows: type[RecordRowsPy] = RecordRowsPy
#: "compiled" or "pure"
IMPLEMENTATION = "pure"

if not NO_EXTENSIONS:
    try:
        from gateway._speedups.recordrow import RecordRows as RecordRowsC
    except ImportError:  # not built, or built from older sources (it refuses to load)
        pass
    else:
        RecordRows = RecordRowsC
        IMPLEMENTATION = "compiled"
