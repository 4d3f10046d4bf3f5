"""The local similarity index of the semantic cache: int8 vectors in coarse cells, top-1 at or above a threshold.

``PartitionedIndex`` keeps one index per partition (the part of a cache key that must match exactly), so a
lookup never scans another partition's entries.

Vectors are normalised and quantised once, at insert (``similarity.quantise``: 384 int8 codes and a scale). They
live in cells, each with a centroid (the normalised sum of its members). A search scores the query against every
centroid and scans only the ``probe`` nearest cells with the compiled kernel (``similarity_in_use``), so a
lookup reads a few thousand rows whatever the size. Cells are made by splitting: a cell that reaches
``cell_size`` rows is cut in two by a few rounds of 2-means over its members, so the index needs no training and
a small partition is one cell, scanned whole (exact up to int8). An insert costs one centroid scan; a split
(every ~cell_size/2 inserts into a cell) about a millisecond.

Entries carry an expiry: expired rows are never answered, and ``purge(now)`` drops them. Keys are any hashable
values (the cache's entry ids); adding a key again replaces its vector.

Not thread-safe: one index belongs to one event loop (a worker's), which is where it is searched and updated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence
from types import ModuleType
from typing import Any, Protocol

from gateway.cache import similarity_in_use
from gateway.cache.numeric import numpy
from gateway.cache.similarity import Cell

DEFAULT_CELL_SIZE = 512
DEFAULT_PROBE = 16


class SimilarityKernels(Protocol):
    """What the index calls: ``similarity_in_use`` or one twin (``gateway.cache.similarity`` or its compiled twin)."""

    def quantise(self, vector: Any) -> tuple[Any, float]: ...

    def best_match(self, probe: Sequence[Cell], query: Any, query_codes: Any, query_scale: float, threshold: float,
                   now: float) -> tuple[int, int, float]: ...


class _Cell:
    """One coarse cell: its members' int8 codes, scales, expiry and keys, and their running sum."""

    __slots__ = ("codes", "scales", "expiry", "keys", "size", "total", "row", "split_at")

    def __init__(self, np: ModuleType, dim: int, capacity: int, split_at: int) -> None:
        self.codes = np.empty((capacity, dim), dtype=np.int8)
        self.scales = np.empty(capacity, dtype=np.float32)
        self.expiry = np.empty(capacity, dtype=np.float64)
        self.keys: list[Hashable] = []
        self.size = 0
        self.total = np.zeros(dim, dtype=np.float64)
        self.row = -1
        self.split_at = split_at

    def probe_entry(self) -> tuple[Any, Any, Any, int]:
        return (self.codes, self.scales, self.expiry, self.size)


class SimilarityIndex:
    """Top-1 cosine search over unit vectors: ``add``, ``remove``, ``search``, ``purge``; see the module docstring.

    ``kernels`` is the similarity module to use (default: ``similarity_in_use``, compiled when built).
    """

    def __init__(self, dim: int = 384, *, cell_size: int = DEFAULT_CELL_SIZE, probe: int = DEFAULT_PROBE,
                 kernels: SimilarityKernels | None = None) -> None:
        np = numpy()
        if dim < 1 or cell_size < 4 or probe < 1:
            raise ValueError("dim must be >= 1, cell_size >= 4 and probe >= 1")
        self._np = np
        self.dim = dim
        self.cell_size = cell_size
        self.probe = probe
        self._kernels: SimilarityKernels = kernels if kernels is not None else similarity_in_use
        self._cells: list[_Cell] = []
        self._centroids = np.zeros((8, dim), dtype=np.float32)
        self._where: dict[Hashable, tuple[_Cell, int]] = {}

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def keys(self) -> Iterator[Hashable]:
        return iter(self._where)

    @property
    def cells(self) -> int:
        """How many coarse cells the index has now."""
        return len(self._cells)

    # ---- insert -------------------------------------------------------------------------------------------------
    def add(self, key: Hashable, vector: Any, expires_at: float = math.inf) -> None:
        """Store ``vector`` (normalised here) under ``key``, answerable until ``expires_at`` (the caller's clock)."""
        np = self._np
        unit = self._unit(vector)
        if key in self._where:
            self.remove(key)
        codes, scale = self._kernels.quantise(unit)
        cell = self._nearest_cell(unit)
        self._append(cell, key, codes, scale, expires_at)
        cell.total += codes.astype(np.float64) * scale
        self._set_centroid(cell)
        if cell.size >= cell.split_at:
            self._split(cell)

    def _unit(self, vector: Any) -> Any:
        np = self._np
        unit = np.asarray(vector, dtype=np.float32).reshape(-1)
        if unit.shape[0] != self.dim:
            raise ValueError(f"expected a vector of {self.dim} numbers, got {unit.shape[0]}")
        norm = float(np.linalg.norm(unit))
        if not math.isfinite(norm) or norm == 0.0:
            raise ValueError("cannot index a zero or non-finite vector")
        return np.ascontiguousarray(unit / norm, dtype=np.float32)

    def _nearest_cell(self, unit: Any) -> _Cell:
        if not self._cells:
            return self._new_cell(16)
        if len(self._cells) == 1:
            return self._cells[0]
        scores = self._centroids[: len(self._cells)] @ unit
        return self._cells[int(scores.argmax())]

    def _new_cell(self, capacity: int) -> _Cell:
        np = self._np
        cell = _Cell(np, self.dim, capacity, self.cell_size)
        cell.row = len(self._cells)
        self._cells.append(cell)
        if cell.row >= self._centroids.shape[0]:
            grown = np.zeros((self._centroids.shape[0] * 2, self.dim), dtype=np.float32)
            grown[: cell.row] = self._centroids[: cell.row]
            self._centroids = grown
        return cell

    def _append(self, cell: _Cell, key: Hashable, codes: Any, scale: float, expires_at: float) -> None:
        if cell.size == cell.codes.shape[0]:
            self._grow(cell, _roomy(cell.size))
        pos = cell.size
        cell.codes[pos] = codes
        cell.scales[pos] = scale
        cell.expiry[pos] = expires_at
        cell.keys.append(key)
        cell.size = pos + 1
        self._where[key] = (cell, pos)

    def _grow(self, cell: _Cell, capacity: int) -> None:
        np = self._np
        n = cell.size
        codes = np.empty((capacity, self.dim), dtype=np.int8)
        codes[:n] = cell.codes[:n]
        scales = np.empty(capacity, dtype=np.float32)
        scales[:n] = cell.scales[:n]
        expiry = np.empty(capacity, dtype=np.float64)
        expiry[:n] = cell.expiry[:n]
        cell.codes, cell.scales, cell.expiry = codes, scales, expiry

    def _set_centroid(self, cell: _Cell) -> None:
        norm = float(self._np.linalg.norm(cell.total))
        self._centroids[cell.row] = cell.total / norm if norm > 0 else 0.0

    # ---- split --------------------------------------------------------------------------------------------------
    def _split(self, cell: _Cell) -> None:
        """Cut a full cell in two by 2-means over its members; a cell that will not cut waits until twice as full."""
        np = self._np
        n = cell.size
        members = cell.codes[:n].astype(np.float32) * cell.scales[:n, None]
        side = _two_means(np, members, cell.total)
        moving = int(side.sum())
        if moving == 0 or moving == n:
            cell.split_at *= 2
            return
        stay = np.flatnonzero(~side)
        move = np.flatnonzero(side)
        other = self._new_cell(_roomy(moving))
        self._fill(other, cell, move, members[move].sum(axis=0, dtype=np.float64))
        kept = _Cell(np, self.dim, _roomy(len(stay)), self.cell_size)
        kept.row = cell.row
        self._cells[cell.row] = kept
        self._fill(kept, cell, stay, members[stay].sum(axis=0, dtype=np.float64))

    def _fill(self, target: _Cell, source: _Cell, rows: Any, total: Any) -> None:
        n = len(rows)
        target.codes[:n] = source.codes[rows]
        target.scales[:n] = source.scales[rows]
        target.expiry[:n] = source.expiry[rows]
        keys = source.keys
        target.keys = [keys[i] for i in rows.tolist()]
        target.size = n
        target.total = total
        self._where.update(zip(target.keys, zip(itertools.repeat(target), range(n))))
        self._set_centroid(target)

    # ---- remove -------------------------------------------------------------------------------------------------
    def remove(self, key: Hashable) -> bool:
        """Forget ``key``; False when it was not there."""
        found = self._where.pop(key, None)
        if found is None:
            return False
        np = self._np
        cell, pos = found
        cell.total -= cell.codes[pos].astype(np.float64) * float(cell.scales[pos])
        last = cell.size - 1
        if pos != last:
            cell.codes[pos] = cell.codes[last]
            cell.scales[pos] = cell.scales[last]
            cell.expiry[pos] = cell.expiry[last]
            moved = cell.keys[last]
            cell.keys[pos] = moved
            self._where[moved] = (cell, pos)
        cell.keys.pop()
        cell.size = last
        if last == 0:
            self._drop_cell(cell)
        else:
            self._set_centroid(cell)
        return True

    def _drop_cell(self, cell: _Cell) -> None:
        last = self._cells.pop()
        if last is not cell:
            last.row = cell.row
            self._cells[cell.row] = last
            self._centroids[cell.row] = self._centroids[len(self._cells)]

    def expired(self, now: float) -> list[Hashable]:
        """The keys whose expiry is at or before ``now``."""
        found: list[Hashable] = []
        for cell in self._cells:
            rows = self._np.flatnonzero(cell.expiry[: cell.size] <= now)
            found.extend(cell.keys[i] for i in rows.tolist())
        return found

    def purge(self, now: float) -> int:
        """Drop every entry whose expiry is at or before ``now``; how many went."""
        expired = self.expired(now)
        for key in expired:
            self.remove(key)
        return len(expired)

    # ---- search -------------------------------------------------------------------------------------------------
    def search(self, vector: Any, threshold: float, now: float = -math.inf) -> tuple[Hashable, float] | None:
        """(key, cosine) of the best live entry at or above ``threshold`` among the probed cells, else None."""
        if not self._cells:
            return None
        np = self._np
        query = self._unit(vector)
        cells = self._cells
        if len(cells) > self.probe:
            scores = self._centroids[: len(cells)] @ query
            nearest = np.argpartition(scores, len(cells) - self.probe)[len(cells) - self.probe :]
            cells = [cells[i] for i in nearest.tolist()]
        codes, scale = self._kernels.quantise(query)
        p, row, score = self._kernels.best_match(
            [c.probe_entry() for c in cells], query, codes, scale, threshold, now
        )
        if p < 0:
            return None
        return cells[p].keys[row], score

    def nbytes(self) -> int:
        """Bytes held in arrays (codes, scales, expiry, sums, centroids); keys and the key map are not counted."""
        arrays = sum(c.codes.nbytes + c.scales.nbytes + c.expiry.nbytes + c.total.nbytes for c in self._cells)
        return arrays + self._centroids.nbytes


def _roomy(rows: int) -> int:
    """Capacity for ``rows`` rows and a quarter more (arrays grow by copying, in steps of a quarter or more)."""
    return max(16, rows + rows // 4)


def _two_means(np: ModuleType, members: Any, total: Any, rounds: int = 6) -> Any:
    """A boolean side per member: 2-means seeded with the member farthest from the centroid and the one farthest
    from that."""
    centre = total / (np.linalg.norm(total) or 1.0)
    a = members[int((members @ centre.astype(np.float32)).argmin())]
    b = members[int((members @ a).argmin())]
    side = None
    for _ in range(rounds):
        new_side = (members @ b) > (members @ a)
        if side is not None and np.array_equal(new_side, side):
            break
        side = new_side
        if side.all() or not side.any():
            break
        a = _normalised(np, members[~side].sum(axis=0))
        b = _normalised(np, members[side].sum(axis=0))
    return side


def _normalised(np: ModuleType, vector: Any) -> Any:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class PartitionedIndex:
    """One ``SimilarityIndex`` per partition (what must match exactly: workspace or namespace, model, parameters,
    the conversation's context digest), so a lookup only ever scans entries it may be served from."""

    def __init__(self, dim: int = 384, *, cell_size: int = DEFAULT_CELL_SIZE, probe: int = DEFAULT_PROBE,
                 kernels: SimilarityKernels | None = None) -> None:
        self.dim = dim
        self._options: dict[str, Any] = {"cell_size": cell_size, "probe": probe, "kernels": kernels}
        self._indexes: dict[Hashable, SimilarityIndex] = {}
        self._partition_of: dict[Hashable, Hashable] = {}

    def __len__(self) -> int:
        return len(self._partition_of)

    def __contains__(self, key: object) -> bool:
        return key in self._partition_of

    @property
    def partitions(self) -> int:
        return len(self._indexes)

    def add(self, partition: Hashable, key: Hashable, vector: Any, expires_at: float = math.inf) -> None:
        """Store ``vector`` under ``key`` in ``partition`` (a key lives in one partition; adding it again moves it)."""
        previous = self._partition_of.get(key)
        if previous is not None and previous != partition:
            self.remove(key)
        index = self._indexes.get(partition)
        if index is None:
            index = self._indexes[partition] = SimilarityIndex(self.dim, **self._options)
        index.add(key, vector, expires_at)
        self._partition_of[key] = partition

    def remove(self, key: Hashable) -> bool:
        partition = self._partition_of.pop(key, None)
        if partition is None:
            return False
        index = self._indexes[partition]
        index.remove(key)
        if not len(index):
            del self._indexes[partition]
        return True

    def search(self, partition: Hashable, vector: Any, threshold: float,
               now: float = -math.inf) -> tuple[Hashable, float] | None:
        index = self._indexes.get(partition)
        return None if index is None else index.search(vector, threshold, now)

    def purge(self, now: float) -> int:
        """Drop every expired entry of every partition; how many went."""
        expired = [key for index in self._indexes.values() for key in index.expired(now)]
        for key in expired:
            self.remove(key)
        return len(expired)

    def nbytes(self) -> int:
        return sum(index.nbytes() for index in self._indexes.values())
