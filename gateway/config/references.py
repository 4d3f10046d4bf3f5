"""Configs that name control-plane records: provider slugs (``provider: "@slug"``, ``virtual_key``) and a prompt.

``ConfigReferences.refs_of`` finds them once per parsed Config (cached by identity; None for the usual config that
names none, so such a request pays one dict lookup). ``expand`` turns each slug reference into the slug's provider and
credentials, per workspace, through the worker's ``RecordCache``: a key the config node sets itself wins over the
slug's, and the expanded Config is cached until the records change. A slug's secrets go only to the host the slug
defines (``gateway.config.slug_hosts``, checked here at every calling target). ``prompt_id`` is honoured at the
config's root only (a target's own ``prompt_id`` is a 400 naming it).
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from gateway.bounded_cache import BoundedCache
from gateway.config.slug_hosts import EMPTY, Scope, SlugUse
from gateway.controlplane.directory import SLUG, RecordCache, RecordsNeeded
from gateway.controlplane.providers import CREDENTIAL_FIELDS
from gateway.http.errors import InvalidRequest
from gateway.http.fields import join_path
from gateway.schema.config import Config

CACHE_MAX = 4096


class Refs:
    """The record references of one config: slug names (in order of appearance)."""

    __slots__ = ("slugs",)

    def __init__(self, slugs: list[str]) -> None:
        self.slugs = slugs


def slug_name(node: Config) -> tuple[str, str] | None:
    """``(slug, field)`` when the node names a slug by ``provider: "@slug"`` or ``virtual_key``."""
    provider = node.provider
    if provider is not None and provider.startswith("@"):
        return provider[1:], "provider"
    if node.virtual_key:
        key = node.virtual_key
        return (key[1:] if key.startswith("@") else key), "virtual_key"
    return None


def _scan(node: Config, path: str, slugs: list[str]) -> None:
    found = slug_name(node)
    if found is not None and found[0] not in slugs:
        slugs.append(found[0])
    if path and node.prompt_id is not None:
        raise InvalidRequest(
            f"invalid config: {join_path(path, 'prompt_id')}: prompt_id is honoured only at the config's root",
            param=join_path(path, "prompt_id"),
        )
    for i, target in enumerate(node.targets or ()):
        _scan(target, f"{join_path(path, 'targets')}[{i}]", slugs)


def _expand(node: Config, path: str, workspace: str, records: RecordCache, above: Scope) -> Config:
    changes: dict[str, Any] = {}
    found = slug_name(node)
    use = None
    if found is not None:
        name, field = found
        slug = records.slug(workspace, name)
        if slug is None:
            param = join_path(path, field)
            raise InvalidRequest(f"invalid config: {param}: unknown provider slug '@{name}'", param=param)
        use = SlugUse(name, slug, join_path(path, field))
        changes["provider"] = slug.provider
        changes["virtual_key"] = None
        for key in CREDENTIAL_FIELDS:
            value = getattr(slug, key)
            if value is not None and getattr(node, key) is None:
                changes[key] = value
    scope = above.below(node, path, use)
    if node.targets:
        targets = [_expand(t, f"{join_path(path, 'targets')}[{i}]", workspace, records, scope)
                   for i, t in enumerate(node.targets)]
        if any(new is not old for new, old in zip(targets, node.targets)):
            changes["targets"] = targets
    else:
        scope.check_leaf()
    return replace(node, **changes) if changes else node


class ConfigReferences:
    """The record references of parsed configs (remembered per Config object) and their expansion. One per
    resolver (so per worker runtime)."""

    def __init__(self, max_entries: int = CACHE_MAX) -> None:
        self._refs: BoundedCache[int, tuple[Config, Refs | None]] = BoundedCache(max_entries)

    def plain(self, config: Config) -> bool:
        """True when ``config`` names no slug (the usual answer: one dict lookup once the config was seen)."""
        hit = self._refs.get(id(config))
        if hit is not None and hit[0] is config:
            return hit[1] is None
        return self.refs_of(config) is None

    def refs_of(self, config: Config) -> Refs | None:
        """The config's record references, None when it names no slug; a target's prompt_id is a 400."""
        hit = self._refs.get(id(config))
        if hit is not None and hit[0] is config:
            return hit[1]
        slugs: list[str] = []
        _scan(config, "", slugs)
        refs = Refs(slugs) if slugs else None
        self._refs[id(config)] = (config, refs)  # the entry holds the config: its id is not reused meanwhile
        return refs

    def expand(self, config: Config, workspace: str, records: RecordCache) -> Config:
        """``config`` with every slug reference replaced by the slug's provider and credentials (the same object
        when it names none). Raises RecordsNeeded for slugs ``records`` has not loaded, 400 for unknown ones."""
        key = ("expanded", workspace, id(config))
        hit = records.derived.get(key)  # derived values go when the records go: a hit needs no further check
        if hit is not None and hit[0] is config:
            return hit[1]
        refs = self.refs_of(config)
        if refs is None:
            return config
        expanded = _expand_named(config, refs.slugs, workspace, records)
        records.keep(key, (config, expanded))
        return expanded

    @staticmethod
    def check(config: Config, workspace: str, records: RecordCache) -> None:
        """What ``expand`` checks (unknown slugs, a slug's secrets sent to another host), remembering nothing: for
        configs that are only looked at (``POST /v1/configs/validate``). Raises RecordsNeeded or the same 400."""
        slugs: list[str] = []
        _scan(config, "", slugs)
        if slugs:
            _expand_named(config, slugs, workspace, records)


def _expand_named(config: Config, slugs: list[str], workspace: str, records: RecordCache) -> Config:
    """``config`` expanded once every slug it names is loaded (RecordsNeeded names those that are not)."""
    missing = [(SLUG, workspace, name) for name in slugs if not records.has(SLUG, workspace, name)]
    if missing:
        raise RecordsNeeded(missing)
    return _expand(config, "", workspace, records, EMPTY)
