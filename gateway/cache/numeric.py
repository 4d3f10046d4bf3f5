"""numpy for the semantic cache, imported on first use with its BLAS kept to one thread.

A worker that never serves a semantic request never imports numpy. When one does, OpenBLAS must not start a
thread per core: its threads spin while they wait, taking CPU from the event loop and from the embedding pool, and
the cache's matrix work (a few hundred centroids, 2-means over one cell) is too small to gain from them. The
limit is set only when numpy is not loaded yet and the variable is unset, so an operator's own value wins.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType


def numpy() -> ModuleType:
    """The numpy module (imported now if it was not)."""
    loaded = sys.modules.get("numpy")
    if loaded is not None:
        return loaded
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np

    return np
