"""A stored secret stays with the host it was saved for: an update that moves a provider slug or a saved config's
target to another host (``custom_host``, ``provider`` or another host-choosing setting) must send the secret again,
or the update is refused. Otherwise ``PUT`` with a new ``custom_host`` alone would send the sealed key to whoever
runs that host (docs/control-plane.md, "Provider slugs" and "Saved configs").
"""

from __future__ import annotations

from typing import Any, Mapping

from gateway.http.errors import InvalidRequest

#: the settings that choose where a provider's requests go: the provider (its own host) and every setting that
#: names a host or picks one of a provider's (cloudB's resource, endpoint, deployment, region and type).
#: ``cloudA_region`` and ``cloudC_region`` only pick among the provider's own regional hosts.
HOST_FIELDS: tuple[str, ...] = ("provider", "custom_host", "resource_name", "cloudB_endpoint_name",
                                "cloudB_deployment_name", "cloudB_region", "cloudB_deployment_type")
#: where a webhook check's credentials go, and the path steps under which a check's parameters sit (a hook's
#: ``{"id", "parameters"}`` or a config's ``{"default.webhook": {...}}``)
WEBHOOK_URL = "webhookURL"
CHECK_MARKERS = ("parameters", "default.webhook")

Path = tuple[str | int, ...]


def check_slug_move(current: Mapping[str, Any], changes: Mapping[str, Any], secrets: Mapping[str, Any],
                    hosts: tuple[str, ...] = HOST_FIELDS) -> None:
    """400 when ``changes`` (a slug update) move the slug to another host (a change of one of ``hosts``: a
    provider slug's by default, an MCP server's ``url``) while secrets it holds (``secrets``) are not sent again
    (or removed with null) in the same update."""
    moved = [k for k in hosts if k in changes and changes[k] != current.get(k)]
    kept = [k for k in secrets if k not in changes]
    if moved and kept:
        raise InvalidRequest(
            f"{moved[0]} changes where the slug's requests go, and its stored {', '.join(kept)} would go there too: "
            f"send {' and '.join(kept)} again in the same request (or null to remove them)", param=moved[0])


def _at(doc: Any, path: Path) -> Any:
    for step in path:
        try:
            doc = doc[step]
        except (KeyError, IndexError, TypeError):
            return None
    return doc


def _hosts(doc: Any, node_path: Path) -> set[tuple[Any, ...]] | None:
    """Every host (as the values of ``HOST_FIELDS``, inherited down the targets) that the node at ``node_path``
    and the targets under it may call; None when there is no such node."""
    inherited: dict[str, Any] = {}
    node = doc
    for step in node_path:
        if isinstance(node, dict):
            inherited.update({k: node[k] for k in HOST_FIELDS if k in node})
        node = _at(node, (step,))
    if not isinstance(node, dict):
        return None
    found: set[tuple[Any, ...]] = set()
    pending: list[tuple[Any, dict[str, Any]]] = [(node, inherited)]
    while pending:
        current, above = pending.pop()
        if not isinstance(current, dict):
            continue
        own = {**above, **{k: current[k] for k in HOST_FIELDS if k in current}}
        found.add(tuple(own.get(k) for k in HOST_FIELDS))
        targets = current.get("targets")
        if isinstance(targets, list):
            pending.extend((target, own) for target in targets)
    return found


def moved_from(previous: Any, doc: Any, path: Path) -> bool:
    """Whether the secret at ``path`` of a stored document ``previous`` would reach a host in ``doc`` (the update)
    that it did not reach before: its target, or a target under it, calls another host, or its webhook another
    URL."""
    for marker in CHECK_MARKERS:  # a guardrail check's credential: it goes to the check's URL
        if marker in path:
            params = path[:path.index(marker) + 1]
            return _at(previous, (*params, WEBHOOK_URL)) != _at(doc, (*params, WEBHOOK_URL))
    before, after = _hosts(previous, path[:-1]), _hosts(doc, path[:-1])
    return before is None or after is None or not after <= before
