"""SimilarityIndex: add, remove, expire and search; on real embedded prompts it finds what an exact scan finds."""

from __future__ import annotations

import random
from types import ModuleType

import numpy as np
import pytest

from gateway.cache import similarity as pure_similarity
from gateway.cache.index import PartitionedIndex, SimilarityIndex
from gateway.cache.local_model import MiniLmModel
from tests.support.prompts import prompts, reworded
from tests.support.twins import compiled_twin

THRESHOLD = 0.89


@pytest.fixture(params=["pure", "compiled"])
def kernels(request: pytest.FixtureRequest) -> ModuleType:
    return pure_similarity if request.param == "pure" else compiled_twin("similarity")


def random_units(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_a_stored_vector_is_found_and_a_distant_one_is_not(kernels: ModuleType) -> None:
    vectors = random_units(3)
    index = SimilarityIndex(kernels=kernels)
    index.add("a", vectors[0])
    index.add("b", vectors[1] * 7.0)  # normalised at insert
    assert index.search(vectors[1], THRESHOLD)[0] == "b"
    key, score = index.search(vectors[0] * 0.5, THRESHOLD)
    assert key == "a" and score > 0.99
    assert index.search(vectors[2], THRESHOLD) is None
    assert len(index) == 2 and "a" in index and set(index.keys()) == {"a", "b"}


def test_removed_entries_are_not_found(kernels: ModuleType) -> None:
    vectors = random_units(2)
    index = SimilarityIndex(kernels=kernels)
    index.add("a", vectors[0])
    index.add("b", vectors[1])
    assert index.remove("a") and not index.remove("a")
    assert index.search(vectors[0], THRESHOLD) is None
    assert index.search(vectors[1], THRESHOLD)[0] == "b"
    assert index.remove("b") and len(index) == 0 and index.cells == 0
    assert index.search(vectors[1], THRESHOLD) is None


def test_adding_a_key_again_replaces_its_vector(kernels: ModuleType) -> None:
    vectors = random_units(2)
    index = SimilarityIndex(kernels=kernels)
    index.add("a", vectors[0])
    index.add("a", vectors[1])
    assert len(index) == 1
    assert index.search(vectors[0], THRESHOLD) is None
    assert index.search(vectors[1], THRESHOLD)[0] == "a"


def test_expired_entries_are_skipped_and_purged(kernels: ModuleType) -> None:
    vectors = random_units(2)
    index = SimilarityIndex(kernels=kernels)
    index.add("old", vectors[0], expires_at=100.0)
    index.add("new", vectors[1], expires_at=200.0)
    assert index.search(vectors[0], THRESHOLD, now=99.0)[0] == "old"
    assert index.search(vectors[0], THRESHOLD, now=100.0) is None
    assert index.purge(now=150.0) == 1
    assert "old" not in index and "new" in index


def test_cells_split_and_every_entry_stays_findable(kernels: ModuleType) -> None:
    vectors = random_units(300, seed=3)
    index = SimilarityIndex(cell_size=16, probe=2, kernels=kernels)
    for i, v in enumerate(vectors):
        index.add(i, v)
    assert index.cells > 10 and len(index) == 300
    for i, v in enumerate(vectors):
        key, score = index.search(v, 0.99)
        assert key == i and score > 0.99
    for i in range(0, 300, 2):
        index.remove(i)
    for i, v in enumerate(vectors):
        found = index.search(v, 0.99)
        assert (found is None) if i % 2 == 0 else (found[0] == i)
    assert index.nbytes() > 150 * 384


def test_identical_vectors_do_not_split_forever(kernels: ModuleType) -> None:
    vector = random_units(1)[0]
    index = SimilarityIndex(cell_size=8, kernels=kernels)
    for i in range(100):
        index.add(i, vector)
    assert len(index) == 100 and index.search(vector, 0.99)[1] > 0.99


def test_bad_vectors_are_refused() -> None:
    index = SimilarityIndex(dim=4)
    with pytest.raises(ValueError):
        index.add("a", [1.0, 0.0, 0.0])
    with pytest.raises(ValueError):
        index.add("a", [0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError):
        index.add("a", [float("nan"), 0.0, 0.0, 1.0])
    with pytest.raises(ValueError):
        SimilarityIndex(cell_size=1)


# ----------------------------------------------------------------- agreement with an exact float32 scan on text

@pytest.fixture(scope="module")
def embedded() -> tuple[np.ndarray, np.ndarray]:
    """600 stored prompts; 150 rewordings of stored ones and 150 new prompts from the same templates."""
    every = prompts(750, seed=11)
    stored, fresh = every[:600], every[600:]
    rng = random.Random(4)
    queries = [reworded(stored[i], rng) for i in rng.sample(range(600), 150)] + fresh
    model = MiniLmModel()
    return model.embed_many(stored), model.embed_many(queries)


def test_the_index_finds_what_an_exact_float32_scan_finds(kernels: ModuleType, embedded) -> None:
    stored, queries = embedded
    index = SimilarityIndex(cell_size=32, probe=8, kernels=kernels)  # ~30 cells: most are not scanned
    for i, v in enumerate(stored):
        index.add(i, v)
    assert index.cells >= 20
    exact = stored @ queries.T
    same_decision = same_entry = hits = 0
    for j in range(len(queries)):
        best = int(exact[:, j].argmax())
        should_hit = exact[best, j] >= THRESHOLD
        hits += should_hit
        found = index.search(queries[j], THRESHOLD)
        same_decision += (found is not None) == should_hit
        # the exact scan's entry, or one whose float32 score ties it within the int8 error
        same_entry += (found is None and not should_hit) or (
            found is not None and should_hit and exact[best, j] - exact[found[0], j] < 0.003
        )
    assert hits > 150  # the rewordings hit, and some template neighbours do too
    assert same_decision >= 0.99 * len(queries)
    assert same_entry >= 0.99 * len(queries)


# ----------------------------------------------------------------------------------------------- partitions

def test_a_partition_only_answers_from_its_own_entries(kernels: ModuleType) -> None:
    vectors = random_units(3)
    index = PartitionedIndex(kernels=kernels)
    index.add("model-a", "k1", vectors[0])
    index.add("model-b", "k2", vectors[0])
    index.add("model-b", "k3", vectors[1], expires_at=10.0)
    assert index.search("model-a", vectors[0], THRESHOLD)[0] == "k1"
    assert index.search("model-b", vectors[0], THRESHOLD)[0] == "k2"
    assert index.search("model-a", vectors[1], THRESHOLD) is None
    assert index.search("model-c", vectors[0], THRESHOLD) is None
    assert len(index) == 3 and index.partitions == 2 and index.nbytes() > 0


def test_partition_entries_move_expire_and_go(kernels: ModuleType) -> None:
    vectors = random_units(2)
    index = PartitionedIndex(kernels=kernels)
    index.add("p1", "k", vectors[0])
    index.add("p2", "k", vectors[0])  # a key lives in one partition
    assert index.search("p1", vectors[0], THRESHOLD) is None and index.partitions == 1
    index.add("p2", "old", vectors[1], expires_at=5.0)
    assert index.purge(now=6.0) == 1 and "old" not in index
    assert index.remove("k") and not index.remove("k")
    assert len(index) == 0 and index.partitions == 0
