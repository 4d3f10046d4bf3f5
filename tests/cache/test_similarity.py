"""The similarity kernels, compiled and pure: the best stored int8 row at or above a threshold, the same answer."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway._speedups import NO_EXTENSIONS
from gateway.cache import similarity as pure_similarity
from gateway.cache import similarity_in_use
from tests.support.twins import compiled_twin

DIM = 16


def twins() -> list[ModuleType]:
    return [pure_similarity] if NO_EXTENSIONS else [pure_similarity, compiled_twin("similarity")]


@pytest.fixture(params=["pure", "compiled"])
def sim(request: pytest.FixtureRequest) -> ModuleType:
    return pure_similarity if request.param == "pure" else compiled_twin("similarity")


def unit(values: list[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def cell(vectors: list[np.ndarray], expiry: list[float] | None = None, spare: int = 2) -> tuple:
    n = len(vectors)
    codes = np.zeros((n + spare, DIM), dtype=np.int8)
    scales = np.zeros(n + spare, dtype=np.float32)
    for i, v in enumerate(vectors):
        codes[i], scales[i] = pure_similarity.quantise(v)
    times = np.full(n + spare, np.inf)
    if expiry is not None:
        times[:n] = expiry
    return (codes, scales, times, n)


def search(sim: ModuleType, probe: list[tuple], query: np.ndarray, threshold: float, now: float = 0.0) -> tuple:
    codes, scale = sim.quantise(query)
    return sim.best_match(probe, query, codes, scale, threshold, now)


def basis(i: int, tilt: float = 0.0) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    v[(i + 1) % DIM] = tilt
    return unit(v)


def test_finds_the_closest_row_at_or_above_the_threshold(sim: ModuleType) -> None:
    probe = [cell([basis(0), basis(1), basis(2, 0.3)])]
    p, row, score = search(sim, probe, basis(2, 0.25), 0.9)
    assert (p, row) == (0, 2) and score > 0.99
    assert search(sim, probe, basis(2, 0.25), 0.9999) == sim.NO_MATCH
    assert search(sim, probe, basis(5), 0.5) == sim.NO_MATCH


def test_best_across_cells_wins(sim: ModuleType) -> None:
    probe = [cell([basis(0, 0.5)]), cell([basis(3)]), cell([basis(0, 0.1)])]
    p, row, _ = search(sim, probe, basis(0, 0.1), 0.8)
    assert (p, row) == (2, 0)


def test_expired_rows_and_rows_past_the_size_are_never_answered(sim: ModuleType) -> None:
    probe = [cell([basis(0), basis(1)], expiry=[10.0, 100.0])]
    assert search(sim, probe, basis(0), 0.9, now=5.0)[:2] == (0, 0)
    assert search(sim, probe, basis(0), 0.9, now=10.0) == sim.NO_MATCH
    codes, scales, times, _ = cell([basis(0), basis(4)])
    assert search(sim, [(codes, scales, times, 1)], basis(4), 0.9) == sim.NO_MATCH
    assert search(sim, [(codes, scales, times, 0)], basis(0), 0.9) == sim.NO_MATCH
    assert search(sim, [], basis(0), 0.9) == sim.NO_MATCH


def test_quantisation_keeps_the_cosine_within_a_few_thousandths() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        a, b = unit(rng.standard_normal(384)), unit(rng.standard_normal(384))
        b = unit(a + 0.3 * b)
        codes, scale = pure_similarity.quantise(b)
        assert abs(float(a @ (codes.astype(np.float32) * scale)) - float(a @ b)) < 0.003
    zero_codes, zero_scale = pure_similarity.quantise(np.zeros(4, dtype=np.float32))
    assert zero_scale == 0.0 and not zero_codes.any()


def test_the_compiled_twin_refuses_mismatched_shapes() -> None:
    compiled = compiled_twin("similarity")
    codes, scales, times, n = cell([basis(0)])
    q = unit(np.ones(DIM + 1))
    qc, qs = compiled.quantise(q)
    with pytest.raises(ValueError):
        compiled.best_match([(codes, scales, times, n)], q, qc, qs, 0.5, 0.0)
    with pytest.raises(ValueError):
        compiled.best_match([(codes, scales, times, 99)], basis(0), *compiled.quantise(basis(0)), 0.5, 0.0)


def test_twins_expose_the_same_public_names() -> None:
    compiled = compiled_twin("similarity")
    assert set(compiled.__all__) == {"MARGIN", "NO_MATCH", "best_match", "quantise"}
    assert compiled.quantise is pure_similarity.quantise and compiled.MARGIN == pure_similarity.MARGIN


def test_the_kernel_in_use_is_a_working_twin() -> None:
    module = similarity_in_use
    assert module.IMPLEMENTATION == ("pure" if NO_EXTENSIONS else "compiled")
    assert search(module, [cell([basis(1)])], basis(1), 0.9)[:2] == (0, 0)


# ------------------------------------------------------------------------------- the twins agree (hypothesis)

def reference(probe: list[tuple], query: np.ndarray, threshold: float, now: float) -> tuple[float, set]:
    """Independent: float64 sums in plain Python; (best score, every (cell, row) within 1e-4 of it)."""
    scored = []
    for p, (codes, scales, times, size) in enumerate(probe):
        for row in range(size):
            if times[row] <= now:
                continue
            s = sum(float(q) * int(c) for q, c in zip(query.tolist(), codes[row].tolist())) * float(scales[row])
            scored.append((s, (p, row)))
    if not scored:
        return -2.0, set()
    best = max(s for s, _ in scored)
    return best, {where for s, where in scored if s >= best - 1e-4}


vectors = st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=DIM, max_size=DIM).filter(
    lambda v: sum(x * x for x in v) > 1e-3
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.tuples(vectors, st.sampled_from([np.inf, 1.0, 5.0])), max_size=6), max_size=4),
    vectors,
    st.floats(-0.5, 0.99),
    st.integers(0, 3),
    st.sampled_from([0.0, 2.0, 10.0]),
)
def test_twins_agree_with_an_independent_reference(rows, query, threshold, near, now) -> None:
    probe = [cell([unit(v) for v, _ in c], expiry=[t for _, t in c]) for c in rows]
    q = unit(query)
    if near and rows and rows[0]:
        q = unit(unit(rows[0][0][0]) + 0.05 * near * q)  # a query close to a stored row: high scores
    best, winners = reference(probe, q, threshold, now)
    if abs(best - threshold) < 1e-4:
        return  # a score on the threshold itself rounds either way
    for module in twins():
        p, row, score = search(module, probe, q, threshold, now)
        if best < threshold:
            assert (p, row) == (-1, -1), module.__name__
        else:
            assert (p, row) in winners, module.__name__
            assert abs(score - best) < 1e-4
