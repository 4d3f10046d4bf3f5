"""Saved configs: a validated config stored per workspace under an id, used as ``x-gateway-config: <id>``.

The config is kept as JSON text (after the same validation a request's config gets), so a request using the id
parses it through the same cache as an inline config: the same text is one parsed Config.

Its credentials are sealed at rest as a provider slug's are (``gateway.controlplane.sealing``): every value of a
key named in ``providers.SECRET_FIELDS`` (``api_key``, the cloudA keys and session token,
``cloudC_service_account_json``) and every webhook header value and JWT secret of a hook or guardrail check,
wherever it sits (the root, ``targets`` at any depth, any nested object), is taken out of the stored text, which
keeps it masked in its place (``providers.mask``: what every answer shows), and the values go together into
``sealed``, bound to the record's kind, workspace and id. ``opened`` puts them back: the per-worker record cache
does that once per load, so a request pays nothing for it.

A masked value sent back in a create or update (a config read from the API and sent again) keeps the secret stored
at the same JSON path; a masked value with no stored secret there is a 400 naming the path. A record saved before
secrets were sealed (plain text, no ``sealed``) still works and is sealed the first time it is read.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.controlplane import sealing, secret_hosts
from gateway.controlplane.records import Entity, Repository
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import ConfigError, InvalidRequest

KIND = "config"
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET
Path = sealing.Path
#: a config parser's ``parse`` (JSON text -> a validated config, or ConfigError): config sits above the control
#: plane, so the parser is handed in rather than imported
ParseConfig = Callable[[bytes], object]


class ConfigBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/configs`` (name and config required) and ``PUT /v1/configs/{id}`` (either)."""

    name: str | Unset = UNSET
    config: msgspec.Raw | Unset = UNSET
    workspace_id: str | None = None


class SavedConfig(Entity, kw_only=True):
    object: str = "config"
    name: str
    #: the config's JSON text, its secrets masked (exactly as answers show it)
    config: msgspec.Raw
    #: the secrets as one sealed JSON list of ``[path, value]`` (None when the config holds none)
    sealed: str | None = None

    def public(self) -> dict[str, Any]:
        """The record as the API answers it: secrets masked, the sealed blob left out."""
        doc = msgspec.structs.asdict(self)
        del doc["sealed"]
        return doc


def check_name(name: str) -> str:
    if not name or len(name) > 255:
        raise InvalidRequest("name must be 1..255 characters", param="name")
    return name


def check_config(raw: msgspec.Raw, parse: ParseConfig) -> msgspec.Raw:
    """The config text when ``parse`` (the runtime's config parser's) finds it a valid config; else the validator's
    400 with ``config.`` before its path."""
    text = bytes(raw)
    if text == b"null":
        raise InvalidRequest("config is required (a config object)", param="config")
    try:
        parse(text)
    except ConfigError as exc:
        path = exc.param or ""
        param = "config" if path in ("", "config") else f"config.{path}"
        raise ConfigError(exc.message, param=param) from None
    return msgspec.Raw(text)


def create_fields(body: ConfigBody, parse: ParseConfig) -> dict[str, Any]:
    """The name and config (secrets in clear) of a create (both required)."""
    if body.name is UNSET:
        raise InvalidRequest("name is required", param="name")
    if body.config is UNSET:
        raise InvalidRequest("config is required (a config object)", param="config")
    # a new config has nothing stored yet: a masked value in it is a 400
    return {"name": check_name(body.name), "config": check_config(unmasked(body.config, dict), parse)}


def update_fields(body: ConfigBody, parse: ParseConfig, stored: Callable[[], dict[Path, Any]],
                  previous: msgspec.Raw | None = None) -> dict[str, Any]:
    """The fields an update changes (a config is validated like at creation; a masked value in it keeps the secret
    ``stored()`` gives at the same path, unless the target holding it now calls another host than in ``previous``,
    the stored config's text)."""
    changes: dict[str, Any] = {}
    if body.name is not UNSET:
        changes["name"] = check_name(body.name)
    if body.config is not UNSET:
        changes["config"] = check_config(unmasked(body.config, stored, previous), parse)
    if not changes:
        raise InvalidRequest("nothing to update: send name and/or config", param="config")
    return changes


# --- secrets: found, masked, sealed, opened (``gateway.controlplane.sealing``) ------------------------------------


def path_text(path: Path) -> str:
    """``("targets", 0, "api_key")`` as ``config.targets[0].api_key``."""
    return sealing.path_text("config", path)


def _context(workspace: str, id: str) -> str:
    return f"{KIND}/{workspace}/{id}"


def unmasked(raw: msgspec.Raw, secrets: Callable[[], dict[Path, Any]],
             previous: msgspec.Raw | None = None) -> msgspec.Raw:
    """``raw`` with each masked secret value replaced by the secret stored at its path (whose mask it is; ``secrets``
    opens them, asked only when a mask is there); a masked value without one is a 400 naming the path, and so is
    one whose target calls another host than in ``previous`` (``secret_hosts.moved_from``). The text is returned as
    given when it holds no mask."""
    doc = msgspec.json.decode(bytes(raw))
    before = None if previous is None else msgspec.json.decode(bytes(previous))
    moved = None if before is None else (lambda path: secret_hosts.moved_from(before, doc, path))
    if not sealing.restore_masked(doc, secrets, path_text, moved):
        return raw
    return msgspec.Raw(msgspec.json.encode(doc))


def sealed_fields(box: SecretBox, workspace: str, id: str, raw: msgspec.Raw) -> dict[str, Any]:
    """``config`` (the text with its secrets masked) and ``sealed`` (the secrets) of a config in clear."""
    doc = msgspec.json.decode(bytes(raw))
    sealed = sealing.seal(box, _context(workspace, id), doc)
    if sealed is None:
        return {"config": raw, "sealed": None}
    return {"config": msgspec.Raw(msgspec.json.encode(doc)), "sealed": sealed}


def stored_secrets(box: SecretBox, record: SavedConfig) -> dict[Path, Any]:
    """The record's secrets by path, opened (SecretError when another key sealed them); a plain record's as
    they stand in its text."""
    if record.sealed is None:
        return sealing.secrets_in(msgspec.json.decode(bytes(record.config)))
    return sealing.opened(box, _context(record.workspace_id, record.id), record.sealed)


def opened(box: SecretBox, record: SavedConfig) -> bytes:
    """The config's text with its secrets in clear, as requests use it (SecretError as ``stored_secrets``)."""
    if record.sealed is None:
        return bytes(record.config)
    doc = msgspec.json.decode(bytes(record.config))
    sealing.reveal(doc, stored_secrets(box, record))
    return msgspec.json.encode(doc)


def is_plain(record: SavedConfig) -> bool:
    """True for a record saved before secrets were sealed that holds some in clear."""
    return record.sealed is None and bool(sealing.secrets_in(msgspec.json.decode(bytes(record.config))))


async def sealed_record(repo: Repository[SavedConfig], box: SecretBox, record: SavedConfig) -> SavedConfig:
    """``record`` with its secrets sealed: a plain (older) record is sealed and stored again, unchanged otherwise
    (same text in use, same ``last_updated_at``), unless it changed since it was read. Best effort: when the store
    cannot take the write now, the next read seals it."""
    if not is_plain(record):
        return record
    sealed = msgspec.structs.replace(record, **sealed_fields(box, record.workspace_id, record.id, record.config))
    await sealing.rewrite_sealed(repo, record, sealed)
    return sealed
