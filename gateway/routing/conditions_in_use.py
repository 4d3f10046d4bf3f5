"""Condition evaluation in use: the compiled twin (``gateway._speedups.conditions``) unless ``NO_EXTENSIONS`` is on
or it is not built or stale, else the pure one (``gateway.routing.conditions``). Chosen once, at import. Queries are
compiled by the pure module in both cases (``compile_query``)."""

from __future__ import annotations

from gateway._speedups import NO_EXTENSIONS
from gateway.routing.conditions import evaluate as evaluate_py
from gateway.routing.conditions import first_match as first_match_py

evaluate = evaluate_py
first_match = first_match_py
#: "compiled" or "pure"
IMPLEMENTATION = "pure"

if not NO_EXTENSIONS:
    try:
        from gateway._speedups.conditions import evaluate as evaluate_c
        from gateway._speedups.conditions import first_match as first_match_c
    except ImportError:  # not built, or built from older sources (it refuses to load)
        pass
    else:
        evaluate, first_match = evaluate_c, first_match_c
        IMPLEMENTATION = "compiled"
