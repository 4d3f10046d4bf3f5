"""A provider slug's secrets go only to the host the slug itself defines.

A slug's secret credentials (``SECRET_FIELDS``: api keys, cloudA keys, the cloudC service account) fill a config
node where the node leaves them unset, and flow down to the node's targets. Whoever writes a config (or headers)
could otherwise point those secrets at a host of their choosing: a ``custom_host``, another provider (each has its
own default host) or, for cloudB, another resource or endpoint name. So wherever a target would call upstream
with a slug's secret, each setting that chooses the host must be the slug's own value (unset when the slug leaves
it unset); anything else is a 400 naming the setting's JSON path.

When the slug has a ``custom_host``, that is the host (every adapter sends there), so only ``custom_host`` must
match; otherwise the provider's own host is used, so the provider and its host-choosing settings must match (and
``custom_host`` stay unset).

A node that sets a secret itself (its own ``api_key``, say) uses its own for that key: when none of the slug's
secrets is left in use, the node may point anywhere. Regions of cloudA and cloudC are not host-choosing here:
they pick among the provider's own regional hosts (``bedrock-runtime.<region>.amazonaws.com``,
``<region>-aiplatform.googleapis.com``), validated as region names by the adapters.

The check runs where slug references are expanded (``gateway.config.references``), once per config and workspace
(the result is cached with the expansion), so a request pays nothing for it.
"""

from __future__ import annotations

from typing import Any

from gateway.controlplane.providers import SECRET_FIELDS
from gateway.http.errors import InvalidRequest
from gateway.schema.config import Config

#: settings that choose the upstream host, per provider (every provider: ``custom_host``)
_CLOUDB_HOST = ("custom_host", "resource_name", "cloudB_endpoint_name", "cloudB_deployment_name", "cloudB_region",
                "cloudB_deployment_type")
_HOST_FIELDS: dict[str, tuple[str, ...]] = {"cloudB": _CLOUDB_HOST}
_DEFAULT_HOST_FIELDS = ("custom_host",)
#: every setting tracked down the tree: the provider (its default host) and each host-choosing one
TRACKED = ("provider", *_CLOUDB_HOST)
#: header-borne host settings of ``x-gateway-provider: @slug`` requests -> the header that sets them
HEADER_NAMES = {"custom_host": "x-gateway-custom-host", "resource_name": "x-gateway-cloudB-resource-name"}


def host_fields(provider: str) -> tuple[str, ...]:
    """The settings that choose ``provider``'s upstream host (besides ``provider`` itself)."""
    return _HOST_FIELDS.get(provider, _DEFAULT_HOST_FIELDS)


def holds_secrets(slug: Config) -> bool:
    return any(getattr(slug, key) is not None for key in SECRET_FIELDS)


class SlugUse:
    """A slug whose secrets a node uses: its name, its config and where the config names it."""

    __slots__ = ("name", "config", "path")

    def __init__(self, name: str, config: Config, path: str) -> None:
        self.name = name
        self.config = config
        self.path = path


class Scope:
    """What a node's targets inherit, as far as the rule cares: which slug each secret key comes from, and each
    tracked setting's value with the JSON path that set it."""

    __slots__ = ("secrets", "hosts")

    def __init__(self, secrets: dict[str, SlugUse], hosts: dict[str, tuple[Any, str]]) -> None:
        self.secrets = secrets
        self.hosts = hosts

    def below(self, node: Config, path: str, slug: SlugUse | None) -> Scope:
        """The scope at ``node`` (at ``path``; ``slug`` is the slug it names, if any)."""
        secrets = dict(self.secrets)
        hosts = dict(self.hosts)
        for key in SECRET_FIELDS:
            if getattr(node, key) is not None:
                secrets.pop(key, None)  # the node's own key: no slug's secret in use for it
            elif slug is not None and getattr(slug.config, key) is not None:
                secrets[key] = slug
        for key in TRACKED:
            own = getattr(node, key)
            if own is not None and not (key == "provider" and slug is not None):
                hosts[key] = (own, f"{path}.{key}" if path else key)
            elif slug is not None and getattr(slug.config, key) is not None:
                hosts[key] = (getattr(slug.config, key), slug.path)
        return Scope(secrets, hosts)

    def check_leaf(self) -> None:
        """400 when this (calling) node would send a slug's secret to a host the slug does not define."""
        seen: set[str] = set()
        for use in self.secrets.values():
            if use.name not in seen:
                seen.add(use.name)
                self._check(use)

    def _check(self, use: SlugUse) -> None:
        slug = use.config
        host = self.hosts.get("custom_host", (None, ""))[0]
        if host is not None or slug.custom_host is not None:
            keys: tuple[str, ...] = ("custom_host",)  # every adapter sends to the custom host when there is one
        else:
            keys = ("provider", *host_fields(slug.provider or ""))  # the provider's own host, chosen by these
        for key in keys:
            value, where = self.hosts.get(key, (None, use.path))
            if value != getattr(slug, key):
                raise InvalidRequest(
                    f"invalid config: {where}: provider slug '@{use.name}' holds secret credentials, which are sent "
                    f"only to the host the slug defines; {key} may not change it here (set your own credentials, "
                    "such as api_key, beside the slug to use another host)",
                    param=where,
                )


EMPTY = Scope({}, {})


def check_header_values(name: str, slug: Config, values: dict[str, Any], param: str) -> None:
    """``x-gateway-provider: @slug`` (or ``x-gateway-virtual-key``): 400 naming the header when a header value
    (``values``: those filling what the slug leaves unset) would choose the host a slug holding secrets is sent
    to. Header values never replace a slug's own keys, so a slug's secrets are always in use on this path."""
    if not holds_secrets(slug):
        return
    for key in host_fields(slug.provider or ""):
        if key in values:
            header = HEADER_NAMES.get(key, key)
            raise InvalidRequest(
                f"{header}: provider slug '@{name}' (named by {param}) holds secret credentials, which are sent only "
                "to the host the slug defines",
                param=header,
            )
