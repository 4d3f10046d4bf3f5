"""The four ways of identifying a provider -> one validated Config.

1. ``x-gateway-provider`` + ``Authorization: Bearer`` (the token becomes the provider's own auth);
2. ``x-gateway-provider: @slug`` or the legacy ``x-gateway-virtual-key`` (provider slugs: control plane);
3. ``x-gateway-config``: a JSON config (starts with ``{``) or a saved config's id (control plane);
4. ``x-gateway-custom-host`` + ``x-gateway-provider`` + bearer.

Header values fill what a JSON config leaves unset at its root (provider, api_key from the bearer, custom_host,
cloud headers) before it is validated, so ``{"provider": "vendorA"}`` can take its key from ``Authorization``.
A config made from headers alone is validated by the same rules (known provider, custom host form, one of the
required-key groups), its faults named by header.
Configs are cached by their text and the header values that completed them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.config.schema import Config
from gateway.config.validate import ConfigParser, decode_config
from gateway.http.context import RequestContext
from gateway.http.errors import ConfigError, InvalidRequest

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
    for attr, field in _HEADER_FIELDS:
        value = getattr(ctx, attr)
        if value:
            values[field] = value
    return values


#: a config path of a header-built config -> the header that set it
_HEADER_PARAMS = {"provider": "x-gateway-provider", "custom_host": "x-gateway-custom-host"}


def _check_slug(provider: str) -> None:
    if provider.startswith("@"):
        raise InvalidRequest(f"unknown provider slug '{provider}'", param="x-gateway-provider")


class ConfigResolver:
    """A request's config from its headers, through ``parser``; remembers the configs built from header values and
    the JSON configs completed by them. One per worker runtime."""

    def __init__(self, parser: ConfigParser) -> None:
        self.parser = parser
        self._parse = parser.parse
        self._header_configs: BoundedCache[tuple[Any, ...], Config] = BoundedCache(CACHE_MAX)
        self._merged: BoundedCache[tuple[Any, ...], Config] = BoundedCache(CACHE_MAX)

    def resolve(self, ctx: RequestContext) -> Config:
        """The request's config; 400 when no way of identifying a provider is given or the given one is invalid."""
        if ctx.config:
            text = ctx.config.strip()
            if not text.startswith("{"):
                raise InvalidRequest(f"unknown saved config '{text}'", param="x-gateway-config")
            values = _header_values(ctx)
            if not values:
                return self._parse(text)
            merged_key = (text, tuple(values.items()))
            merged = self._merged.get(merged_key)
            if merged is None:
                config = decode_config(text)
                unset = {k: v for k, v in values.items() if getattr(config, k) is None}
                if "provider" in unset:
                    _check_slug(unset["provider"])
                merged = self.parser.validate(msgspec.structs.replace(config, **unset) if unset else config)
                self._merged[merged_key] = merged
            return merged
        if ctx.provider:
            _check_slug(ctx.provider)
            key: tuple[Any, ...] = (ctx.provider, ctx.bearer, ctx.custom_host)
            if ctx.has_cloud_headers:
                key += tuple(getattr(ctx, a) for a, _ in _HEADER_FIELDS[1:])
            built = self._header_configs.get(key)
            if built is None:
                built = self._header_configs.put(key, self._validated_header_config(Config(**_header_values(ctx))))
            return built
        if ctx.virtual_key:
            raise InvalidRequest(f"unknown virtual key '{ctx.virtual_key}'", param="x-gateway-virtual-key")
        raise InvalidRequest(
            "no provider given: send x-gateway-provider with an Authorization bearer token, x-gateway-config, "
            "or x-gateway-custom-host with x-gateway-provider",
            param="x-gateway-provider",
        )

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
