"""Provider slugs: a named provider with its credentials, stored per workspace, secrets sealed at rest.

A slug record holds a provider name and any of the config object's provider and cloud credential keys
(``CREDENTIAL_FIELDS``). The secret ones (``SECRET_FIELDS``: api keys, cloudA keys and session token, cloudC service
account) are sealed together with ``gateway.controlplane.secrets`` and never returned: the API shows them masked
(``MASK`` or the first three and last four characters of long values, computed when written). The other keys
(hosts, regions, deployment names, versions) are stored and shown as given.

``slug_config`` opens a record into the ``Config`` a request uses (``provider`` plus its credentials); the
per-worker cache (``gateway.controlplane.directory``) keeps those, so a request using a slug costs a dict lookup.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gateway.controlplane.records import Entity, applied
from gateway.controlplane.secret_hosts import check_slug_move
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest
from gateway.providers.registry import is_known, provider_names
from gateway.schema import header_values
from gateway.schema.config import Config, Deployment
from gateway.schema.header_values import field_with_breaks

KIND = "provider"
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
MASK = "********"

SECRET_FIELDS = ("api_key", "cloudA_access_key_id", "cloudA_secret_access_key", "cloudA_session_token",
                 "cloudC_service_account_json")
PLAIN_FIELDS = ("custom_host", "resource_name", "deployment_id", "api_version", "deployments", "vendorA_organization",
                "vendorA_project", "cloudA_region", "cloudC_project_id", "cloudC_region", "cloudB_region",
                "cloudB_deployment_name", "cloudB_endpoint_name", "cloudB_api_version", "cloudB_deployment_type")
CREDENTIAL_FIELDS = SECRET_FIELDS + PLAIN_FIELDS


class ProviderFields(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/providers`` and ``PUT /v1/providers/{slug}``: a key left out is unchanged by a PUT,
    a key sent as null is removed."""

    slug: str | None | Unset = UNSET
    provider: str | None | Unset = UNSET
    name: str | None | Unset = UNSET
    api_key: str | None | Unset = UNSET
    cloudA_access_key_id: str | None | Unset = UNSET
    cloudA_secret_access_key: str | None | Unset = UNSET
    cloudA_session_token: str | None | Unset = UNSET
    cloudC_service_account_json: dict[str, Any] | None | Unset = UNSET
    custom_host: str | None | Unset = UNSET
    resource_name: str | None | Unset = UNSET
    deployment_id: str | None | Unset = UNSET
    api_version: str | None | Unset = UNSET
    deployments: list[Deployment] | None | Unset = UNSET
    vendorA_organization: str | None | Unset = UNSET
    vendorA_project: str | None | Unset = UNSET
    cloudA_region: str | None | Unset = UNSET
    cloudC_project_id: str | None | Unset = UNSET
    cloudC_region: str | None | Unset = UNSET
    cloudB_region: str | None | Unset = UNSET
    cloudB_deployment_name: str | None | Unset = UNSET
    cloudB_endpoint_name: str | None | Unset = UNSET
    cloudB_api_version: str | None | Unset = UNSET
    cloudB_deployment_type: str | None | Unset = UNSET


class ProviderSlug(Entity, kw_only=True):
    """A stored slug: ``id`` is the slug (unique within its workspace)."""

    object: str = "provider"
    slug: str
    provider: str
    name: str | None = None
    #: the non-secret credential keys, as given
    settings: dict[str, Any] = {}
    #: the secret keys as one sealed JSON object (None when there are none)
    sealed: str | None = None
    #: secret key -> its masked form, for answers
    masked: dict[str, str] = {}

    def public(self) -> dict[str, Any]:
        """The record as the API answers it: settings flattened, secrets masked, the sealed blob left out."""
        doc: dict[str, Any] = {
            "id": self.id, "object": self.object, "slug": self.slug, "provider": self.provider, "name": self.name,
            "workspace_id": self.workspace_id, "organisation_id": self.organisation_id,
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
        }
        doc.update(self.settings)
        doc.update(self.masked)
        return doc


def normalise_slug(value: str, param: str = "slug") -> str:
    """A slug as stored: without a leading ``@``; 400 unless 1..63 letters, digits, ``.``, ``_`` or ``-``."""
    slug = value[1:] if value.startswith("@") else value
    if not SLUG.match(slug):
        raise InvalidRequest(
            f"{param} must be 1..63 letters, digits, '.', '_' or '-' (starting with a letter or digit), got {value!r}",
            param=param,
        )
    return slug


def mask(value: Any) -> str:
    if isinstance(value, str) and len(value) >= 16:
        return f"{value[:3]}****{value[-4:]}"
    return MASK


def _context(workspace: str, slug: str) -> str:
    return f"{KIND}/{workspace}/{slug}"


def _check(fields: dict[str, Any]) -> None:
    provider = fields.get("provider")
    if provider is not None and (provider.startswith("@") or not is_known(provider)):
        raise InvalidRequest(
            f"provider must be a provider name (one of {', '.join(provider_names())}), got {provider!r}",
            param="provider",
        )
    host = fields.get("custom_host")
    if host is not None:
        from gateway.upstream.ssrf import check_base_url

        check_base_url(host, "custom_host")
    broken = field_with_breaks(fields)
    if broken is not None:
        raise InvalidRequest(f"{broken} {header_values.MESSAGE}", param=broken)
    kind = fields.get("cloudB_deployment_type")
    if kind is not None and kind not in ("serverless", "managed"):
        raise InvalidRequest("cloudB_deployment_type must be serverless or managed", param="cloudB_deployment_type")
    name = fields.get("name")
    if name is not None and len(name) > 255:
        raise InvalidRequest("name must be at most 255 characters", param="name")
    for key, value in fields.items():
        if isinstance(value, str) and not value and key != "name":
            raise InvalidRequest(f"{key} must not be empty (leave it out, or send null to remove it)", param=key)


def build(box: SecretBox, workspace: str, slug: str, fields: dict[str, Any]) -> ProviderSlug:
    """A record from the validated ``fields`` (the body's keys that are set; ``provider`` required)."""
    _check(fields)
    if not fields.get("provider"):
        raise InvalidRequest("provider is required", param="provider")
    secrets = {k: fields[k] for k in SECRET_FIELDS if fields.get(k) is not None}
    settings = {k: fields[k] for k in PLAIN_FIELDS if fields.get(k) is not None}
    sealed = box.seal(msgspec.json.encode(secrets), _context(workspace, slug)) if secrets else None
    return ProviderSlug(
        id=slug, slug=slug, provider=fields["provider"], name=fields.get("name"), workspace_id=workspace,
        settings=settings, sealed=sealed, masked={k: mask(v) for k, v in secrets.items()},
    )


def secrets_of(box: SecretBox, record: ProviderSlug) -> dict[str, Any]:
    """The record's secret keys, opened (SecretError when another key sealed them)."""
    if record.sealed is None:
        return {}
    return msgspec.json.decode(box.open(record.sealed, _context(record.workspace_id, record.slug)))


def updated(box: SecretBox, record: ProviderSlug, changes: dict[str, Any]) -> ProviderSlug:
    """``record`` with ``changes`` applied: a given key replaces, a key sent as null is removed, others stay. A
    change of host (``secret_hosts.HOST_FIELDS``) must send the stored secrets again or remove them (400)."""
    secrets = secrets_of(box, record)
    current: dict[str, Any] = {"provider": record.provider, "name": record.name, **record.settings, **secrets}
    check_slug_move(current, changes, secrets)
    fresh = build(box, record.workspace_id, record.slug, applied(current, changes))
    return msgspec.structs.replace(fresh, created_at=record.created_at, organisation_id=record.organisation_id)


def slug_config(box: SecretBox, record: ProviderSlug) -> Config:
    """The config a request gets from the slug: ``provider`` and every credential key the slug holds."""
    values: dict[str, Any] = dict(record.settings)
    if "deployments" in values:
        values["deployments"] = msgspec.convert(values["deployments"], list[Deployment])
    values.update(secrets_of(box, record))
    return Config(provider=record.provider, **values)
