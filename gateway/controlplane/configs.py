"""Saved configs: a validated config stored per workspace under an id, used as ``x-gateway-config: <id>``.

The config is kept as the JSON text it was given (after the same validation a request's config gets), so a request
using the id parses it through the same cache as an inline config: the same text is one parsed Config.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.config.validate import ConfigParser
from gateway.controlplane.records import Entity
from gateway.http.errors import ConfigError, InvalidRequest

KIND = "config"
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


class ConfigBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/configs`` (name and config required) and ``PUT /v1/configs/{id}`` (either)."""

    name: str | Unset = UNSET
    config: msgspec.Raw | Unset = UNSET
    workspace_id: str | None = None


class SavedConfig(Entity, kw_only=True):
    object: str = "config"
    name: str
    #: the config's JSON text, as given
    config: msgspec.Raw


def check_name(name: str) -> str:
    if not name or len(name) > 255:
        raise InvalidRequest("name must be 1..255 characters", param="name")
    return name


def check_config(raw: msgspec.Raw, parser: ConfigParser) -> msgspec.Raw:
    """The config text when ``parser`` finds it a valid config; else the validator's 400 with ``config.`` before
    its path."""
    text = bytes(raw)
    if text == b"null":
        raise InvalidRequest("config is required (a config object)", param="config")
    try:
        parser.parse(text)
    except ConfigError as exc:
        path = exc.param or ""
        param = "config" if path in ("", "config") else f"config.{path}"
        raise ConfigError(exc.message, param=param) from None
    return msgspec.Raw(text)


def create_fields(body: ConfigBody, parser: ConfigParser) -> dict[str, Any]:
    """The name and config of a create (both required)."""
    if body.name is UNSET:
        raise InvalidRequest("name is required", param="name")
    if body.config is UNSET:
        raise InvalidRequest("config is required (a config object)", param="config")
    return {"name": check_name(body.name), "config": check_config(body.config, parser)}


def update_fields(body: ConfigBody, parser: ConfigParser) -> dict[str, Any]:
    """The fields an update changes (a config is validated like at creation)."""
    changes: dict[str, Any] = {}
    if body.name is not UNSET:
        changes["name"] = check_name(body.name)
    if body.config is not UNSET:
        changes["config"] = check_config(body.config, parser)
    if not changes:
        raise InvalidRequest("nothing to update: send name and/or config", param="config")
    return changes
