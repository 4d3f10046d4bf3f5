# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of gateway.cache.similarity: the best stored int8 row above a threshold, in typed loops.

Each row is first scored int8 · int8 (32-bit sums; the C compiler vectorises the loop), which approximates the
cosine within a few thousandths; only rows within ``MARGIN`` of the threshold are rescored as the pure twin
scores every row (float32 query · int8 codes × scale). Quantisation is done once per vector, so it is the pure
module's own. The GIL is held: a search is well under a millisecond and runs on the event loop.
"""

from gateway.cache.similarity import MARGIN, NO_MATCH, quantise

__all__ = ["MARGIN", "NO_MATCH", "best_match", "quantise"]

# A build from older sources must not pass for this twin: its public names must be the pure module's.
from gateway.cache import similarity as _pure

if __all__ != getattr(_pure, "__all__", None):
    raise ImportError("gateway._speedups.similarity is stale: __all__ differs from the pure module")
del _pure


cdef inline int _dot_i8(const signed char* a, const signed char* b, Py_ssize_t n) noexcept nogil:
    cdef int acc = 0
    cdef Py_ssize_t d
    for d in range(n):
        acc += <int>a[d] * <int>b[d]
    return acc


cdef inline float _dot_f_i8(const float* q, const signed char* b, Py_ssize_t n) noexcept nogil:
    cdef float acc = 0
    cdef Py_ssize_t d
    for d in range(n):
        acc += q[d] * <float>b[d]
    return acc


def best_match(probe, const float[::1] query, const signed char[::1] query_codes, float query_scale,
               float threshold, double now):
    """(cell position in ``probe``, row, score) of the highest-scoring live row at or above ``threshold``."""
    cdef Py_ssize_t dim = query.shape[0]
    cdef Py_ssize_t p = 0, row, size
    cdef const signed char[:, ::1] codes
    cdef const float[::1] scales
    cdef const double[::1] expiry
    cdef const signed char* base
    cdef float floor = threshold - MARGIN
    cdef float approx, score, top = -2.0
    cdef Py_ssize_t best_p = -1, best_row = -1
    if query_codes.shape[0] != dim:
        raise ValueError("query and query_codes differ in length")
    for cell in probe:
        codes, scales, expiry, size = cell
        if size > codes.shape[0] or size > scales.shape[0] or size > expiry.shape[0]:
            raise ValueError("a cell's size exceeds its arrays")
        if size and codes.shape[1] != dim:
            raise ValueError("stored vectors and the query differ in length")
        if size:
            base = &codes[0, 0]
            for row in range(size):
                approx = _dot_i8(base + row * dim, &query_codes[0], dim) * query_scale * scales[row]
                if approx < floor or expiry[row] <= now:
                    continue
                score = _dot_f_i8(&query[0], base + row * dim, dim) * scales[row]
                if score >= threshold and score > top:
                    top = score
                    best_p = p
                    best_row = row
        p += 1
    if best_p < 0:
        return NO_MATCH
    return (best_p, best_row, top)
