"""Credentials inside a stored JSON document (a saved config, a saved guardrail): found, masked in place, sealed
apart, opened back. One mechanism for every record that keeps such a document.

A document's secrets are, wherever they sit (the root, ``targets`` at any depth, hooks and guardrails, any nested
object):

- the value of every key named in ``providers.SECRET_FIELDS`` (``api_key``, the cloudA keys and session token,
  ``cloudC_service_account_json``);
- the credentials of a guardrail check (``CHECK_SECRETS``): every header value of a ``default.webhook`` check
  (``Authorization``, ``x-api-key``...) and the ``secret`` of a ``default.jwt`` check, in either form a check
  takes: ``{"id": "default.webhook", "parameters": {...}}`` (hooks, saved guardrails) or
  ``{"default.webhook": {...}}`` (a guardrail object of a config).

``seal`` takes them out of the document, which keeps each masked in its place (``providers.mask``: what every
answer shows), and seals them together as one JSON list of ``[path, value]`` bound to the record's kind, workspace
and id (``context``); ``reveal`` puts the opened values back. ``restore_masked`` gives a masked value sent back (a
document read from the API and sent again) the secret stored at the same path, and is a 400 naming the path when
nothing is stored there.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from gateway.controlplane.providers import MASK, SECRET_FIELDS, mask
from gateway.controlplane.records import E, Repository
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest, ServiceUnavailable

#: where a secret sits in a document: object keys and list indexes from the root
Path = tuple[str | int, ...]
_SECRET_KEYS = frozenset(SECRET_FIELDS)
#: the parameters of a check that hold credentials: (parameter, True when every value of that object is one)
CHECK_SECRETS: dict[str, tuple[str, bool]] = {"default.webhook": ("headers", True), "default.jwt": ("secret", False)}
_MASKED = re.compile(r"^.{3}\*{4}.{4}$", re.DOTALL)


def _check_secrets(check_id: str, params: dict[str, Any], path: Path, found: dict[Path, Any]) -> None:
    name, each = CHECK_SECRETS[check_id]
    value = params.get(name)
    if each and isinstance(value, dict):
        for key, item in value.items():
            if item is not None:
                found[(*path, name, key)] = item
    elif not each and value is not None:
        found[(*path, name)] = value


def secrets_in(doc: Any, path: Path = (), found: dict[Path, Any] | None = None) -> dict[Path, Any]:
    """Every secret of ``doc`` by path, at any depth (a null value is no secret)."""
    if found is None:
        found = {}
    if isinstance(doc, dict):
        check_id, params = doc.get("id"), doc.get("parameters")
        if isinstance(check_id, str) and check_id in CHECK_SECRETS and isinstance(params, dict):
            _check_secrets(check_id, params, (*path, "parameters"), found)
        for key, value in doc.items():
            if key in _SECRET_KEYS and value is not None:
                found[(*path, key)] = value
                continue
            if key in CHECK_SECRETS and isinstance(value, dict):
                _check_secrets(key, value, (*path, key), found)
            if isinstance(value, (dict, list)):
                secrets_in(value, (*path, key), found)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            if isinstance(value, (dict, list)):
                secrets_in(value, (*path, i), found)
    return found


def put(doc: Any, path: Path, value: Any) -> None:
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


def path_text(root: str, path: Path) -> str:
    """``("targets", 0, "api_key")`` under ``config`` as ``config.targets[0].api_key``."""
    text = root
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def looks_masked(value: Any) -> bool:
    return isinstance(value, str) and (value == MASK or _MASKED.match(value) is not None)


def restore_masked(doc: Any, stored: Callable[[], dict[Path, Any]], where: Callable[[Path], str],
                   moved: Callable[[Path], bool] | None = None) -> bool:
    """Replace each masked secret value of ``doc`` by the secret stored at its path (whose mask it is; ``stored``
    opens them, asked only when a mask is there); a masked value without one is a 400 naming ``where(path)``, and
    so is one whose secret would go to another host (``moved(path)``: the update changed where it is sent).
    True when something was replaced."""
    masked = [(path, value) for path, value in secrets_in(doc).items() if looks_masked(value)]
    if not masked:
        return False
    secrets = stored()
    for path, value in masked:
        if path not in secrets or mask(secrets[path]) != value:
            raise InvalidRequest(
                f"{where(path)} is a masked value with no stored secret at that place: send the secret itself "
                "(a masked value sent back unchanged keeps the secret stored at the same place)",
                param=where(path),
            )
        if moved is not None and moved(path):
            raise InvalidRequest(
                f"{where(path)} is a masked value, but this update sends it to another host than the one it was "
                "saved for: send the secret itself again (a stored secret never follows a change of host)",
                param=where(path),
            )
        put(doc, path, secrets[path])
    return True


def seal(box: SecretBox, context: str, doc: Any) -> str | None:
    """Mask ``doc``'s secrets in place and answer them sealed under ``context`` (None when it holds none)."""
    found = secrets_in(doc)
    if not found:
        return None
    for path, value in found.items():
        put(doc, path, mask(value))
    return box.seal(msgspec.json.encode([[list(path), value] for path, value in found.items()]), context)


def opened(box: SecretBox, context: str, sealed: str) -> dict[Path, Any]:
    """The secrets ``seal`` sealed, by path (SecretError when another key sealed them or the context differs)."""
    return {tuple(path): value for path, value in msgspec.json.decode(box.open(sealed, context))}


def reveal(doc: Any, secrets: dict[Path, Any]) -> None:
    """Put opened secrets back in place of their masks."""
    for path, value in secrets.items():
        put(doc, path, value)


async def rewrite_sealed(repo: Repository[E], plain: E, sealed: E) -> None:
    """Store ``sealed`` in place of the record ``plain`` as read (one saved in clear by an older release), unless
    it changed since (checked in the write itself: a newer write wins); best effort: when the store cannot take
    the write now, the next read seals it."""
    try:
        await repo.rewrite(sealed, expected=plain)
    except ServiceUnavailable:
        pass
