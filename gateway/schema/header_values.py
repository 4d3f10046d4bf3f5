"""Config values that travel in an upstream request's head (headers, host, path, query): which fields they are, and
the check that refuses CR, LF and NUL in them where they enter (a config, a provider slug, a saved config), so a
stored credential can never break the request line or a header later (docs/configs-and-routing.md#configs-and-routing).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

#: the config's string fields an adapter puts in a header, the host, the path or the query of an upstream request
HEADER_FIELDS: tuple[str, ...] = (
    "provider", "api_key", "virtual_key", "prompt_id", "custom_host", "resource_name", "deployment_id", "api_version",
    "vendorA_organization", "vendorA_project", "cloudA_access_key_id", "cloudA_secret_access_key", "cloudA_region",
    "cloudA_session_token", "cloudC_project_id", "cloudC_region", "cloudB_region", "cloudB_deployment_name",
    "cloudB_endpoint_name", "cloudB_api_version", "cloudB_deployment_type",
)
#: the string fields of each ``deployments`` item
DEPLOYMENT_FIELDS: tuple[str, ...] = ("deployment_id", "alias", "api_version")

_BREAKS = re.compile(r"[\r\n\x00]")
MESSAGE = "must not contain CR, LF or NUL characters (it is sent in the upstream request's head)"


def has_breaks(value: object) -> bool:
    """Whether ``value`` is a string holding CR, LF or NUL."""
    return isinstance(value, str) and _BREAKS.search(value) is not None


def _value(holder: Any, name: str) -> Any:
    return holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)


def field_with_breaks(values: Any, fields: Iterable[str] = HEADER_FIELDS) -> str | None:
    """The first of ``fields`` whose value (an attribute of ``values``, or its key when it is a dict) holds CR, LF or
    NUL, with the index of a ``deployments`` item (``deployments[1].alias``); None when there is none."""
    for name in fields:
        if has_breaks(_value(values, name)):
            return name
    for i, item in enumerate(_value(values, "deployments") or ()):
        for name in DEPLOYMENT_FIELDS:
            if has_breaks(_value(item, name)):
                return f"deployments[{i}].{name}"
    return None
