"""Param rewriting on the request body, in this order: override_params replace the client's values,
default_params fill only fields the client did not send, drop_params remove dot-notation paths (nested keys and
array indices, e.g. ``response_format.json_schema`` or ``messages.0.name``) from the final body.
"""

from __future__ import annotations

from typing import Any

from gateway.schema.config import Config


def needs_rewrite(config: Config) -> bool:
    return bool(config.override_params or config.default_params or config.drop_params)


def _drop(doc: Any, path: str) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return
        if node is None:
            return
    last = parts[-1]
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        del node[int(last)]


def rewrite(body: dict[str, Any], config: Config) -> dict[str, Any]:
    """Apply override -> default -> drop to the decoded body (in place) and return it."""
    if config.override_params:
        body.update(config.override_params)
    if config.default_params:
        for key, value in config.default_params.items():
            if key not in body:
                body[key] = value
    if config.drop_params:
        for path in config.drop_params:
            _drop(body, path)
    return body
