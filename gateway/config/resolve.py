"""The four ways of identifying a provider -> one validated Config.

1. ``x-gateway-provider`` + ``Authorization: Bearer`` (the token becomes the provider's own auth);
2. ``x-gateway-provider: @slug`` or the legacy ``x-gateway-virtual-key`` (a provider slug of the caller's
   workspace: its provider and credentials; header values fill what the slug leaves unset, but never the host
   a slug holding secrets is sent to: ``gateway.config.slug_hosts``);
3. ``x-gateway-config``: a JSON config (starts with ``{``) or a saved config's id (of the caller's workspace);
4. ``x-gateway-custom-host`` + ``x-gateway-provider`` + bearer.

Header values fill what a JSON config leaves unset at its root (provider, api_key from the bearer, custom_host,
cloud headers, virtual key) before it is validated, so ``{"provider": "vendorA"}`` can take its key from
``Authorization``. A config made from headers alone is validated by the same rules (known provider, custom host
form, one of the required-key groups), its faults named by header. Configs are cached by their text and the header
values that completed them; slug references in them are then expanded per workspace
(``gateway.config.references``).

Records (slugs, saved configs) come from the worker's ``RecordCache`` by dict lookup; on a miss it raises
``RecordsNeeded`` and the caller awaits ``records.fetch`` and calls again.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.config.references import ConfigReferences
from gateway.config.slug_hosts import check_header_values
from gateway.config.validate import ConfigParser, decode_config
from gateway.controlplane.directory import RecordCache
from gateway.http.context import RequestContext
from gateway.http.errors import ConfigError, InvalidRequest
from gateway.schema.config import Config

#: RequestContext attribute -> Config field, for header-borne provider settings
_HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("custom_host", "custom_host"),
    ("cloudB_resource_name", "resource_name"),
    ("cloudB_deployment_id", "deployment_id"),
    ("cloudB_api_version", "api_version"),
    ("cloudC_project_id", "cloudC_project_id"),
    ("cloudC_region", "cloudC_region"),
    ("cloudA_access_key_id", "cloudA_access_key_id"),
    ("cloudA_secret_access_key", "cloudA_secret_access_key"),
    ("cloudA_session_token", "cloudA_session_token"),
    ("cloudA_region", "cloudA_region"),
)

#: configs remembered per resolver, of each kind
CACHE_MAX = 4096


def _header_values(ctx: RequestContext) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if ctx.provider:
        values["provider"] = ctx.provider
    if ctx.bearer:
        values["api_key"] = ctx.bearer
    if ctx.custom_host:
        values["custom_host"] = ctx.custom_host
    if ctx.has_cloud_headers:
        for attr, field in _HEADER_FIELDS[1:]:
            value = getattr(ctx, attr)
            if value:
                values[field] = value
    return values


#: a config path of a header-built config -> the header that set it
_HEADER_PARAMS = {"provider": "x-gateway-provider", "custom_host": "x-gateway-custom-host"}


def _slug(value: str) -> str:
    return value[1:] if value.startswith("@") else value


class ConfigResolver:
    """A request's config from its headers, through ``parser``; remembers the configs built from header values and
    the JSON configs completed by them, and expands slug references (``refs``). One per worker runtime."""

    def __init__(self, parser: ConfigParser) -> None:
        self.parser = parser
        self._parse = parser.parse
        self.refs = ConfigReferences()
        self._plain = self.refs.plain
        self._header_configs: BoundedCache[tuple[Any, ...], Config] = BoundedCache(CACHE_MAX)
        self._merged: BoundedCache[tuple[Any, ...], Config] = BoundedCache(CACHE_MAX)

    def resolve(self, ctx: RequestContext, records: RecordCache | None = None) -> Config:
        """The request's config; 400 when no way of identifying a provider is given or the given one is invalid.
        Raises RecordsNeeded when ``records`` lacks a slug or saved config the request names."""
        if ctx.config:
            text = ctx.config.strip()
            source: str | bytes = text if text.startswith("{") else self._saved_config(ctx, records, text)
            values = _header_values(ctx)
            if ctx.virtual_key:
                values["virtual_key"] = ctx.virtual_key
            if not values:
                config = self._parse(source)
            else:
                merged_key = (source, tuple(values.items()))
                merged = self._merged.get(merged_key)
                if merged is None:
                    decoded = decode_config(source)
                    unset = {k: v for k, v in values.items() if getattr(decoded, k) is None}
                    if "virtual_key" in unset and (decoded.provider is not None or "provider" in unset):
                        del unset["virtual_key"]
                    merged = self._merged.put(merged_key, self.parser.validate(
                        msgspec.structs.replace(decoded, **unset) if unset else decoded))
                config = merged
            if records is None or self._plain(config):  # the usual config names no slug: one dict lookup
                return config
            return self.refs.expand(config, ctx.workspace or "", records)
        provider = ctx.provider
        if provider:
            if provider[0] == "@":
                return self._from_slug(ctx, records, provider[1:], "x-gateway-provider")
            key: tuple[Any, ...] = (provider, ctx.bearer, ctx.custom_host)
            if ctx.has_cloud_headers:
                key += tuple(getattr(ctx, a) for a, _ in _HEADER_FIELDS[1:])
            built = self._header_configs.get(key)
            if built is None:
                built = self._header_configs.put(key, self._validated_header_config(Config(**_header_values(ctx))))
            return built
        if ctx.virtual_key:
            return self._from_slug(ctx, records, _slug(ctx.virtual_key), "x-gateway-virtual-key")
        raise InvalidRequest(
            "no provider given: send x-gateway-provider with an Authorization bearer token, x-gateway-provider: "
            "@slug, x-gateway-config, or x-gateway-custom-host with x-gateway-provider",
            param="x-gateway-provider",
        )

    @staticmethod
    def _saved_config(ctx: RequestContext, records: RecordCache | None, id: str) -> bytes:
        saved = records.saved_config(ctx.workspace or "", id) if records is not None else None
        if saved is None:
            raise InvalidRequest(f"unknown saved config '{id}'", param="x-gateway-config")
        return saved

    @staticmethod
    def _from_slug(ctx: RequestContext, records: RecordCache | None, name: str, param: str) -> Config:
        """The config of a slug named by a header, completed by the other header values (cached per
        combination until the records change)."""
        if records is None:
            raise InvalidRequest(f"unknown provider slug '@{name}'", param=param)
        key: tuple[Any, ...] = ("header-slug", ctx.workspace, name, ctx.bearer, ctx.custom_host)
        if ctx.has_cloud_headers:
            key += tuple(getattr(ctx, a) for a, _ in _HEADER_FIELDS[1:])
        config = records.derived.get(key)
        if config is not None:
            return config
        slug = records.slug(ctx.workspace or "", name)
        if slug is None:
            raise InvalidRequest(f"unknown provider slug '@{name}'", param=param)
        values = _header_values(ctx)
        values.pop("provider", None)
        unset = {k: v for k, v in values.items() if getattr(slug, k) is None}
        check_header_values(name, slug, unset, param)
        config = msgspec.structs.replace(slug, **unset) if unset else slug
        records.keep(key, config)
        return config

    def _validated_header_config(self, config: Config) -> Config:
        """A config built from headers obeys the same rules as a JSON one; messages name the headers (``param``
        keeps the setting's name, as the SSRF check's 403 does)."""
        try:
            return self.parser.validate(config)
        except ConfigError as exc:
            if exc.param in _HEADER_PARAMS:
                detail = exc.message.split(": ", 2)[-1]
                raise InvalidRequest(f"{_HEADER_PARAMS[exc.param]} {detail}", param=exc.param) from None
            if exc.param == "config":
                raise InvalidRequest(
                    f"provider '{config.provider}' needs credentials: send Authorization: Bearer <provider key>, "
                    "x-gateway-custom-host, or the provider's x-gateway-cloud* headers",
                    param="authorization",
                ) from None
            raise
