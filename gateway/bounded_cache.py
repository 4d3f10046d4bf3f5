"""BoundedCache: the one in-process cache class, a dict that forgets its oldest entries beyond a bound.

Every cache of derived values (parsed configs, routing plans, effective targets, prices...) is one of these, owned by
an object of the worker's ``Runtime`` (never by a module), so a test gets fresh caches by building a runtime.

Eviction is first-in first-out: the entry inserted longest ago goes first. A hit is a plain ``dict.get`` (no
bookkeeping, so the hot path pays nothing for the bound); only an insertion may evict. The bound is a number of
entries and, optionally, a total size: ``sizeof(key, value)`` of every entry, where an entry larger than
``max_item_size`` is not stored at all. Insert with ``cache[key] = value`` (or ``put``, which returns the value);
``dict.update`` and ``setdefault`` bypass the bound and must not be used.
"""

from __future__ import annotations

from typing import Callable, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A dict bounded by entries (and optionally by total size) that evicts its oldest entries first."""

    __slots__ = ("max_entries", "max_size", "max_item_size", "sizeof", "size")

    def __init__(self, max_entries: int, *, max_size: int | None = None, max_item_size: int | None = None,
                 sizeof: Callable[[K, V], int] | None = None) -> None:
        super().__init__()
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        if (max_size is not None or max_item_size is not None) and sizeof is None:
            raise ValueError("a size bound needs sizeof")
        self.max_entries = max_entries
        self.max_size = max_size
        self.max_item_size = max_item_size
        self.sizeof = sizeof
        #: the total size of the entries (0 without ``sizeof``)
        self.size = 0

    def __setitem__(self, key: K, value: V) -> None:
        sizeof = self.sizeof
        if sizeof is None:
            if key not in self:
                while len(self) >= self.max_entries:
                    del self[next(iter(self))]
            dict.__setitem__(self, key, value)
            return
        item = sizeof(key, value)
        if self.max_item_size is not None and item > self.max_item_size:
            return
        if key in self:
            self.pop(key)
        max_size = self.max_size
        while self and (len(self) >= self.max_entries or (max_size is not None and self.size + item > max_size)):
            self.pop(next(iter(self)))
        dict.__setitem__(self, key, value)
        self.size += item

    def put(self, key: K, value: V) -> V:
        """Store ``value`` (within the bounds) and return it."""
        self[key] = value
        return value

    def pop(self, key: K, *default: V) -> V:  # type: ignore[override]
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = dict.pop(self, key)
        if self.sizeof is not None:
            self.size -= self.sizeof(key, value)
        return value

    def __delitem__(self, key: K) -> None:
        self.pop(key)

    def clear(self) -> None:
        dict.clear(self)
        self.size = 0
