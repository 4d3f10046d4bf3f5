"""Inheritance of settings from a config to its targets: the effective config of a target."""

from __future__ import annotations

from msgspec.structs import astuple, replace

from gateway.bounded_cache import BoundedCache
from gateway.schema.config import NOT_INHERITED, Config

# Positions of the inherited fields in ``astuple(config)`` (one C-level call reads every field).
_FIELDS = Config.__struct_fields__
_INHERITED_POSITIONS = tuple(i for i, name in enumerate(_FIELDS) if name not in NOT_INHERITED)
#: effective configs remembered per Inheritance
CACHE_MAX = 8192


class Inheritance:
    """Effective configs of targets, remembered per (parent, child) pair.

    Cache entries are keyed by ``(id(parent), id(child))`` and hold both inputs, so neither id can be reused by
    another object while the entry lives; the identity checks on a hit are belt and braces. Parsed configs are
    shared through the parse cache, so a hot config's targets hit here.
    """

    def __init__(self, max_entries: int = CACHE_MAX) -> None:
        self._cache: BoundedCache[tuple[int, int], tuple[Config, Config, Config]] = BoundedCache(max_entries)

    def effective(self, parent: Config | None, child: Config) -> Config:
        """``child`` with every inherited setting it leaves unset taken from ``parent`` (already effective).

        Every setting except targets, strategy, name, weight and on_status_codes flows down whole (a target's own
        ``override_params`` replaces the parent's, it is not merged). Returns ``child`` itself when nothing is
        taken.
        """
        if parent is None:
            return child
        key = (id(parent), id(child))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is parent and hit[1] is child:
            return hit[2]
        parent_values = astuple(parent)
        child_values = astuple(child)
        taken = {
            _FIELDS[i]: parent_values[i]
            for i in _INHERITED_POSITIONS
            if parent_values[i] is not None and child_values[i] is None
        }
        result = replace(child, **taken) if taken else child
        self._cache[key] = (parent, child, result)
        return result
