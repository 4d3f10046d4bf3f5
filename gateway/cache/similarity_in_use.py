"""The similarity kernel in use: the compiled twin's ``best_match`` (``gateway._speedups.similarity``) unless
``NO_EXTENSIONS`` is on or it is not built or stale, else the pure one (``gateway.cache.similarity``). Chosen once,
at import. Quantisation (``quantise``, once per vector) is the pure module's in both cases."""

from __future__ import annotations

from gateway._speedups import NO_EXTENSIONS
from gateway.cache.similarity import best_match as best_match_py
from gateway.cache.similarity import quantise

__all__ = ["IMPLEMENTATION", "best_match", "quantise"]

best_match = best_match_py
#: "compiled" or "pure"
IMPLEMENTATION = "pure"

if not NO_EXTENSIONS:
    try:
        from gateway._speedups.similarity import best_match as best_match_c
    except ImportError:  # not built, or built from older sources (it refuses to load)
        pass
    else:
        best_match = best_match_c
        IMPLEMENTATION = "compiled"
