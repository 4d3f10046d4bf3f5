"""BoundedCache: a dict that forgets its oldest entries beyond a number of entries or a total size."""

from __future__ import annotations

import pytest

from gateway.bounded_cache import BoundedCache


def test_the_oldest_entry_goes_first_when_the_entry_bound_is_reached():
    cache: BoundedCache[str, int] = BoundedCache(3)
    for i, key in enumerate("abcd"):
        cache[key] = i
    assert list(cache) == ["b", "c", "d"]
    assert cache.get("a") is None and cache.get("d") == 3
    cache["b"] = 10  # replacing an entry evicts nothing
    assert dict(cache) == {"b": 10, "c": 2, "d": 3}


def test_a_size_bound_evicts_until_the_new_entry_fits_and_skips_entries_too_large_alone():
    cache: BoundedCache[str, str] = BoundedCache(100, max_size=10, max_item_size=6, sizeof=lambda k, v: len(v))
    assert cache.put("a", "xxxx") == "xxxx"
    cache["b"] = "yyyy"
    cache["c"] = "zzzz"  # 12 > 10: "a" goes
    assert list(cache) == ["b", "c"] and cache.size == 8
    cache["d"] = "w" * 7  # larger than max_item_size: not kept
    assert "d" not in cache and cache.size == 8
    cache["b"] = "y"  # a replaced entry's size is given back
    assert cache.size == 5
    del cache["c"]
    assert cache.size == 1
    cache.clear()
    assert not cache and cache.size == 0


def test_a_bound_must_make_sense():
    with pytest.raises(ValueError):
        BoundedCache(0)
    with pytest.raises(ValueError):
        BoundedCache(10, max_size=100)
