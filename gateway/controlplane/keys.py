"""Gateway keys: records in the state store (secrets kept only as SHA-256 hashes), roles, scopes and rotation.

What a user sees (roles, scopes, rotation, who may create, rotate or revoke what): docs/control-plane.md, "Gateway
keys". This module owns the records and the rules. Two records per key: the key itself (``api_key``, by id, listed
per workspace) and its principal (``api_key_secret``, by the secret's hash: what a request's lookup reads, one
record get); revoking deletes both, and the per-worker cache (``KeyStore``) forgets the answer for a secret when its
principal changes. ``SCOPES`` and ``DEFAULT_SCOPES`` are the scope table; ``check_grant`` keeps a key from creating,
rotating or revoking a key wider than itself (a rotated key's secret lands in the caller's hands; revoking a wider
key would take away what the caller could not give back).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Collection, Mapping

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.controlplane.records import (
    DEFAULT_ORGANISATION,
    DEFAULT_WORKSPACE,
    UPDATE_ATTEMPTS,
    Entity,
    RecordChanged,
    Repository,
    check_workspace_id,
    now_iso,
    store_unavailable,
)
from gateway.http.errors import Conflict, Forbidden, InvalidRequest, ServiceUnavailable
from gateway.state.base import StateStore, StateStoreError
from gateway.waiting import within

KEY_KIND = "api_key"
SECRET_KIND = "api_key_secret"
ROLES = ("admin", "member")
#: what a role may do, compared when a key grants one: an admin may make members, never the other way
ROLE_RANK = {"member": 0, "admin": 1}

#: every scope and what it allows. The admin routes need the admin role and the scope of their record family:
#: ``<family>.read`` for their GETs, ``<family>.write`` for what changes records (docs/control-plane.md, "Scopes")
SCOPES: dict[str, str] = {
    "inference": "the inference endpoints (chat completions, completions, embeddings, moderations, rerank, images, "
                 "audio, responses, messages), files, batches, fine-tuning jobs and stored responses, and "
                 "validating a config (POST /v1/configs/validate)",
    "prompts.run": "render prompt templates and run them (POST /v1/prompts/{id}/render and /completions)",
    "models.read": "list the models reachable from the workspace (GET /v1/models)",
    "logs.read": "read the workspace's request logs (GET /v1/logs, /v1/logs/stream, /v1/logs/aggregates)",
    "guardrails.invoke": "run guardrail checks directly, outside a request's config",
    "agents.invoke": "call agents through the gateway",
    "mcp.invoke": "call tools, read resources and prompts of the workspace's MCP servers through /v1/mcp",
    "keys.read": "list and read gateway keys (GET /v1/api-keys, /v1/api-keys/{id})",
    "keys.write": "create, rotate and revoke gateway keys (within the caller's own role and scopes)",
    "providers.read": "list and read provider slugs (GET /v1/providers, /v1/providers/{slug})",
    "providers.write": "create, change and delete provider slugs",
    "configs.read": "list and read saved configs (GET /v1/configs, /v1/configs/{id})",
    "configs.write": "create, change and delete saved configs",
    "prompts.read": "list and read prompt templates and their versions (GET /v1/prompts...)",
    "prompts.write": "create, change and delete prompt templates",
    "policies.read": "list and read usage-limit and rate-limit policies (GET /v1/policies/...)",
    "policies.write": "create, change and archive policies",
    "guardrails.read": "list and read saved guardrails (GET /v1/guardrails, /v1/guardrails/{id})",
    "guardrails.write": "create, change and delete saved guardrails",
    "mcp-servers.read": "list and read MCP servers and their tools (GET /v1/mcp-servers, /v1/mcp-servers/{slug}, "
                        "/v1/mcp-servers/{slug}/tools)",
    "mcp-servers.write": "create, change and delete MCP servers and approve their tools' definitions",
    "agents.read": "list and read registered A2A agents and their cards (GET /v1/agents, /v1/agents/{slug})",
    "agents.write": "register, change, refresh and delete A2A agents",
    "metrics.read": "GET /metrics (root keys only: its series sum every workspace's traffic)",
}
#: the scopes of the admin routes (they need the admin role as well)
ADMIN_SCOPES: tuple[str, ...] = (
    "keys.read", "keys.write", "providers.read", "providers.write", "configs.read", "configs.write", "prompts.read",
    "prompts.write", "policies.read", "policies.write", "guardrails.read", "guardrails.write", "metrics.read",
    "mcp-servers.read", "mcp-servers.write", "agents.read", "agents.write")
DEFAULT_SCOPES: dict[str, tuple[str, ...]] = {
    "admin": tuple(SCOPES),
    "member": ("inference", "prompts.run", "models.read", "logs.read", "guardrails.invoke", "agents.invoke",
               "mcp.invoke"),
}
#: how a stored key's scopes read: the version of the scope table a key was made under (``SCOPES_VERSION`` now).
#: An admin key that holds every scope there was at its version could do everything then, so it holds what each
#: later version added too (``SCOPE_ADDITIONS``), and keys made with the defaults keep working; a narrowed key, or a
#: member key, gains nothing (no key grants more than it was given). Version 0 keys were made before the admin
#: routes had scopes; version 1 keys before the MCP scopes; version 2 keys before the agents' admin scopes.
SCOPES_VERSION = 3
SCOPES_BEFORE_ADMIN_SCOPES = frozenset(
    ("inference", "prompts.run", "models.read", "logs.read", "guardrails.invoke", "agents.invoke"))
SCOPES_BEFORE_MCP_SCOPES = SCOPES_BEFORE_ADMIN_SCOPES | frozenset(
    ("keys.read", "keys.write", "providers.read", "providers.write", "configs.read", "configs.write", "prompts.read",
     "prompts.write", "policies.read", "policies.write", "guardrails.read", "guardrails.write", "metrics.read"))
SCOPES_BEFORE_AGENT_SCOPES = SCOPES_BEFORE_MCP_SCOPES | frozenset(("mcp.invoke", "mcp-servers.read",
                                                                  "mcp-servers.write"))
#: per version: (every scope there was at that version, what the next version added)
SCOPE_ADDITIONS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (SCOPES_BEFORE_ADMIN_SCOPES, SCOPES_BEFORE_MCP_SCOPES - SCOPES_BEFORE_ADMIN_SCOPES),
    (SCOPES_BEFORE_MCP_SCOPES, SCOPES_BEFORE_AGENT_SCOPES - SCOPES_BEFORE_MCP_SCOPES),
    (SCOPES_BEFORE_AGENT_SCOPES, frozenset(("agents.read", "agents.write"))),
)
ROTATION_WORDS = {"weekly": 7, "monthly": 30}
SECRET_PREFIX = "gw-"
NEGATIVE_TTL_S = 2.0
NEGATIVE_MAX = 10_000
POSITIVE_MAX = 100_000
LOOKUP_PENDING_MAX = 256
LOOKUP_WAIT_S = 1.0
#: after the store failed a lookup, lookups answer 503 at once for this long instead of queueing behind it
BUSY_BACKOFF_S = 1.0


#: the ASGI scope entry holding the KeyRecord of an in-process request (a line of a gateway-run batch, which runs
#: as its creator's key by id): only the gateway's own dispatcher sets it, never the HTTP server
IN_PROCESS_KEY = "gateway.key"


def missing_scope(scope: str) -> Forbidden:
    """The 403 for a key that lacks ``scope``."""
    return Forbidden(f"this gateway key lacks the scope '{scope}'", param="x-gateway-api-key", code="missing_scope")


def check_grant(granter: KeyRecord | None, role: str, scopes: list[str], *, param: str, role_param: str = "",
                root: bool = False, action: str = "create a key") -> None:
    """403 unless ``granter`` may hand out a key of ``role`` with ``scopes`` (``root``: a root key): only keys within
    its own role and scopes, a root key only by a root key. ``granter`` None (the operator's command line) and the
    root key may grant anything. The 403 names the first role or scope the granter lacks."""
    if granter is None or granter.root:
        return
    rule = "a gateway key may create, rotate or revoke only keys within its own role and scopes"
    if root:
        raise Forbidden(f"this gateway key may not {action}, a root key: only a root key may", param=param,
                        code="missing_role")
    if ROLE_RANK[role] > ROLE_RANK[granter.role]:
        raise Forbidden(f"this gateway key's role is {granter.role}, so it may not {action} whose role is {role} "
                        f"({rule})", param=role_param or param, code="missing_role")
    for scope in scopes:
        if scope not in granter.scopes:
            raise Forbidden(f"this gateway key lacks the scope '{scope}', so it may not {action} that holds it "
                            f"({rule})", param=param, code="missing_scope")


def held_scopes(role: str, scopes: Collection[str], version: int) -> frozenset[str]:
    """The scopes a stored key holds: its own, plus, for an admin key made under an older scope table
    (``version``) with every scope there was then, the scopes each later table added (``SCOPE_ADDITIONS``)."""
    held = frozenset(scopes)
    if role != "admin":
        return held
    for everything_then, added in SCOPE_ADDITIONS[max(version, 0):SCOPES_VERSION]:
        if not everything_then <= held:
            break
        held = held.union(added)
    return held


def in_table_order(scopes: Collection[str]) -> list[str]:
    """``scopes`` in the order of ``SCOPES``."""
    return [scope for scope in SCOPES if scope in scopes]


def key_hash(secret: str) -> str:
    """The stored form of a secret (random 256-bit secrets need no slow hash)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


class ApiKey(Entity, kw_only=True):
    """A gateway key as stored. ``key_hash`` never leaves the gateway (``public`` drops it)."""

    object: str = "api_key"
    name: str
    role: str
    scopes: list[str]
    rotation_period: int | None = None
    rotation_due: str | None = None
    last_rotated_at: str | None = None
    root: bool = False
    #: the first characters of the secret, to tell keys apart in lists
    key_prefix: str = ""
    key_hash: str = ""
    #: which scope table ``scopes`` was written under (absent, so 0, in keys stored before ``SCOPES_VERSION``)
    scopes_version: int = 0
    #: the MCP tools the key may see and call (``<server slug>`` or ``<server slug>/<tool>``); None: every tool its
    #: workspace's servers allow
    mcp_tools: list[str] | None = None

    @property
    def held(self) -> frozenset[str]:
        """The scopes this key holds (``held_scopes``)."""
        return held_scopes(self.role, self.scopes, self.scopes_version)

    def public(self, secret: str | None = None) -> dict[str, Any]:
        """The record as the API answers it (``scopes``: those it holds); ``secret`` (shown once, at creation and
        rotation) as ``key``."""
        doc = msgspec.to_builtins(self)
        del doc["key_hash"], doc["scopes_version"]
        if self.mcp_tools is None:
            doc.pop("mcp_tools", None)
        doc["scopes"] = in_table_order(self.held)
        if secret is not None:
            doc["key"] = secret
        return doc


class Principal(msgspec.Struct, frozen=True, gc=False):
    """What a request's key lookup needs, stored under the secret's hash."""

    key_id: str
    workspace_id: str
    organisation_id: str
    role: str
    scopes: tuple[str, ...]
    root: bool = False
    scopes_version: int = 0
    mcp_tools: tuple[str, ...] | None = None


class KeyRecord:
    """Who a gateway key is: its workspace and organisation, role (``admin`` or ``member``) and scopes.

    ``root`` marks the bootstrap admin key (``GATEWAY_ADMIN_KEY`` or the generated one): an organisation-wide
    admin that may act on any workspace by naming it; every other key acts in its own workspace only.
    ``can_infer`` is ``"inference" in scopes``, read by every inference request.
    """

    __slots__ = ("workspace", "role", "organisation", "key_id", "root", "scopes", "can_infer", "mcp_tools")

    def __init__(self, workspace: str, role: str, organisation: str = DEFAULT_ORGANISATION, key_id: str = "",
                 root: bool = False, scopes: frozenset[str] | None = None,
                 mcp_tools: frozenset[str] | None = None) -> None:
        self.workspace = workspace
        self.role = role
        self.organisation = organisation
        self.key_id = key_id
        self.root = root
        self.scopes = frozenset(DEFAULT_SCOPES[role]) if scopes is None else scopes
        self.can_infer = "inference" in self.scopes
        #: the MCP tools it may use (``<slug>`` or ``<slug>/<tool>``), None: all its workspace's servers allow
        self.mcp_tools = mcp_tools

    @classmethod
    def of(cls, principal: Principal) -> KeyRecord:
        tools = principal.mcp_tools
        return cls(principal.workspace_id, principal.role, principal.organisation_id, principal.key_id,
                   principal.root, held_scopes(principal.role, principal.scopes, principal.scopes_version),
                   None if tools is None else frozenset(tools))

    def may_use_tool(self, slug: str, tool: str) -> bool:
        """Whether the key's MCP tool list (if any) names the server ``slug`` or its ``tool``."""
        tools = self.mcp_tools
        return tools is None or slug in tools or f"{slug}/{tool}" in tools


# --- validation of what a caller asks for ----------------------------------------------------------------------


def check_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidRequest(f"role must be one of {', '.join(ROLES)}, got {role!r}", param="role")
    return role


def check_scopes(scopes: list[str] | None, role: str) -> list[str]:
    """The key's scopes: the role's defaults when None, else each a known scope (400 naming ``scopes[i]``)."""
    if scopes is None:
        return list(DEFAULT_SCOPES[role])
    out: list[str] = []
    for i, scope in enumerate(scopes):
        if scope not in SCOPES:
            raise InvalidRequest(f"unknown scope {scope!r}; scopes are: {', '.join(SCOPES)}", param=f"scopes[{i}]")
        if scope not in out:
            out.append(scope)
    return out


MCP_TOOL_ENTRY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}(/[^/\s]{1,128})?")
MCP_TOOLS_MAX = 1000


def check_mcp_tools(tools: list[str] | None, granter: KeyRecord | None) -> list[str] | None:
    """A key's MCP tool list: each entry ``<server slug>`` or ``<server slug>/<tool>`` (400 naming
    ``mcp_tools[i]``), at most ``MCP_TOOLS_MAX``. A granter with a list of its own may hand out only what it holds:
    the new key must have a list, each entry within the granter's (403 naming the first that is not)."""
    if tools is None:
        if granter is not None and granter.mcp_tools is not None:
            raise Forbidden("this gateway key may use only some MCP tools, so a key it creates must list its "
                            "mcp_tools (within its own)", param="mcp_tools", code="missing_scope")
        return None
    if len(tools) > MCP_TOOLS_MAX:
        raise InvalidRequest(f"mcp_tools holds at most {MCP_TOOLS_MAX} entries", param="mcp_tools")
    out: list[str] = []
    for i, entry in enumerate(tools):
        if not isinstance(entry, str) or not MCP_TOOL_ENTRY.fullmatch(entry):
            raise InvalidRequest("each mcp_tools entry is <server slug> or <server slug>/<tool>, got "
                                 f"{entry!r}", param=f"mcp_tools[{i}]")
        held = granter.mcp_tools if granter is not None else None
        if held is not None and entry not in held and entry.partition("/")[0] not in held:
            raise Forbidden(f"this gateway key may not use the MCP tools {entry!r}, so it may not hand them out",
                            param=f"mcp_tools[{i}]", code="missing_scope")
        if entry not in out:
            out.append(entry)
    return out


def rotation_days(value: int | str | None) -> int | None:
    """``rotation_period`` as days: an integer 1..365, or ``weekly`` (7) / ``monthly`` (30)."""
    if value is None:
        return None
    if isinstance(value, str):
        days = ROTATION_WORDS.get(value.strip().lower())
        if days is None:
            raise InvalidRequest(
                f"rotation_period must be 1..365 days, 'weekly' or 'monthly', got {value!r}", param="rotation_period"
            )
        return days
    if isinstance(value, bool) or not 1 <= value <= 365:
        raise InvalidRequest(f"rotation_period must be 1..365 days, got {value!r}", param="rotation_period")
    return value


def _due(start_iso: str, days: int | None) -> str | None:
    if days is None:
        return None
    start = datetime.fromisoformat(start_iso.replace("Z", "+00:00"))
    return (start + timedelta(days=days)).astimezone(UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


# --- the keys repository ---------------------------------------------------------------------------------------

_principal_decoder = msgspec.json.Decoder(Principal)


class ApiKeys:
    """Create, list, read, rotate and revoke gateway keys; find the principal of a secret."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.repo: Repository[ApiKey] = Repository(store, KEY_KIND, ApiKey, "gk-", "api key")

    async def create(self, *, name: str, role: str, workspace: str = DEFAULT_WORKSPACE,
                     organisation: str = DEFAULT_ORGANISATION, scopes: list[str] | None = None,
                     rotation_period: int | str | None = None, root: bool = False,
                     secret: str | None = None, granter: KeyRecord | None = None,
                     mcp_tools: list[str] | None = None) -> tuple[ApiKey, str]:
        """A new key and its secret (returned only here; ``secret`` imports a given one instead of generating it).
        Validates role, scopes and rotation_period; ``granter`` (the caller's key; None for the operator) must hold
        the role and every scope (``check_grant``)."""
        if not name or len(name) > 255:
            raise InvalidRequest("name must be 1..255 characters", param="name")
        workspace = check_workspace_id(workspace)
        role = check_role(role)
        granted = check_scopes(scopes, role)
        check_grant(granter, role, granted, param="scopes", role_param="role", root=root)
        tools = check_mcp_tools(mcp_tools, granter)
        days = rotation_days(rotation_period)
        secret = secret or new_secret()
        stamp = now_iso()
        record = ApiKey(name=name, role=role, scopes=granted, workspace_id=workspace,
                        organisation_id=organisation, rotation_period=days, rotation_due=_due(stamp, days),
                        last_rotated_at=stamp, root=root, key_prefix=secret[:10], key_hash=key_hash(secret),
                        created_at=stamp, scopes_version=SCOPES_VERSION, mcp_tools=tools)
        record = await self.repo.create(record)
        await self._put_principal(record)
        return record, secret

    async def _put_principal(self, record: ApiKey) -> None:
        principal = Principal(record.id, record.workspace_id, record.organisation_id, record.role,
                              tuple(record.scopes), record.root, record.scopes_version,
                              None if record.mcp_tools is None else tuple(record.mcp_tools))
        try:
            await self.store.record_put(SECRET_KIND, record.key_hash, record.workspace_id,
                                        msgspec.json.encode(principal))
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def _drop_principal(self, hash_: str) -> None:
        try:
            await self.store.record_delete(SECRET_KIND, hash_)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def list(self, workspace: str | None) -> list[ApiKey]:
        return await self.repo.list(workspace)

    async def get(self, workspace: str, id: str) -> ApiKey:
        return await self.repo.get(workspace, id)

    async def revoke(self, workspace: str, id: str, granter: KeyRecord | None = None) -> ApiKey:
        """Delete the key: its secret is refused from then on (within a second on every worker). ``granter`` must
        hold the key's role and scopes (``check_grant``) unless it is that key itself. The record is deleted only as
        read (its secret's hash dropped), read again when a rotation changed it meanwhile: a secret a rotation gave
        out at the same time never outlives the revoke."""
        for _ in range(UPDATE_ATTEMPTS):
            record = await self.repo.get(workspace, id)
            if granter is None or granter.key_id != record.id:
                check_grant(granter, record.role, in_table_order(record.held), param="key_id", root=record.root,
                            action=f"revoke the key '{record.id}'")
            await self._drop_principal(record.key_hash)
            try:
                return await self.repo.delete(workspace, id, expected=record)
            except RecordChanged:
                continue
        raise Conflict(f"the api key '{id}' changed while it was being revoked; retry", param="key_id")

    async def rotate(self, workspace: str, id: str, granter: KeyRecord | None = None) -> tuple[ApiKey, str]:
        """A new secret for the key; the old one stops working. ``granter`` must hold the key's role and scopes
        (``check_grant``): the new secret is that key in its hands. A key rotated or revoked by another request
        meanwhile is a 409 and this rotation's secret is dropped, never given out (two rotations at once must not
        leave two live secrets)."""
        read = await self.repo.get(workspace, id)
        check_grant(granter, read.role, in_table_order(read.held), param="key_id", root=read.root,
                    action=f"rotate the key '{read.id}'")
        secret = new_secret()
        stamp = now_iso()
        record = msgspec.structs.replace(read, key_hash=key_hash(secret), key_prefix=secret[:10],
                                         last_rotated_at=stamp, rotation_due=_due(stamp, read.rotation_period))
        await self._put_principal(record)
        try:
            record = await self.repo.replace(record, expected=read)
        except RecordChanged:
            await self._drop_principal(record.key_hash)
            raise Conflict(f"the api key '{id}' changed while it was being rotated (rotated or revoked by another "
                           "request); retry", param="key_id") from None
        await self._drop_principal(read.key_hash)
        return record, secret

    async def principal(self, secret: str) -> KeyRecord | None:
        """Who ``secret`` is, from the store (None for an unknown or revoked key)."""
        return await self.principal_by_hash(key_hash(secret))

    async def principal_by_hash(self, hash_: str) -> KeyRecord | None:
        """Who the secret hashed to ``hash_`` is, from the store (None for an unknown or revoked key)."""
        found = await self.store.record_get(SECRET_KIND, hash_)
        return None if found is None else KeyRecord.of(_principal_decoder.decode(found.doc))

    async def has_root(self) -> bool:
        return any(k.root for k in await self.repo.list(DEFAULT_WORKSPACE))


BOOTSTRAP_LOCK = "controlplane:bootstrap-admin"


async def ensure_admin_key(store: StateStore, admin_key: str | None) -> str | None:
    """Generate and store a root admin key when ``admin_key`` (GATEWAY_ADMIN_KEY) is unset and no root key
    exists; return its secret (else None). A short lock keeps two instances starting together from both making
    one."""
    if admin_key:
        return None
    if not await store.set_if_absent(BOOTSTRAP_LOCK, b"1", ttl_ms=30_000):
        return None
    try:
        keys = ApiKeys(store)
        if await keys.has_root():
            return None
        _, secret = await keys.create(name="bootstrap admin key", role="admin", root=True)
        return secret
    finally:
        await store.delete(BOOTSTRAP_LOCK)


class KeyStore:
    """The per-worker answer to "who is this key?", never blocking the event loop.

    ``known`` answers from memory (the admin key, keys seen since their principals last changed): the request path's
    dict lookup. ``lookup`` also asks the state store: the same key asked for by several requests at once is one
    read; at most ``LOOKUP_PENDING_MAX`` reads wait at a time and a request waits at most ``LOOKUP_WAIT_S``; once
    the store has failed, lookups answer 503 at once for ``BUSY_BACKOFF_S``. So a slow or unreachable store costs
    an unknown key a 503 (retry shortly) and never stalls anything else, while keys already known keep working.
    Unknown keys are remembered for ``NEGATIVE_TTL_S`` (guessing costs one read per guess and window).
    ``forget`` (called by the records watcher with the hashes of the principals that changed, here at once or
    anywhere by its next poll) forgets the answers for those secrets only, so a key created, rotated or revoked in
    one workspace leaves every other key's answer cached; ``invalidate`` (when the watcher cannot say which changed:
    its change log fell behind, or the store was unreachable) forgets every answer. A read that raced with either
    answers its request but is not remembered.
    """

    #: the record kind its answers come from (the records watcher tells it when one changes): the principals, by
    #: secret hash (a key's own record changes only with its principal; ``by_id`` reads the store)
    KINDS: tuple[str, ...] = (SECRET_KIND,)

    def __init__(self, keys: ApiKeys, admin_key: str | None) -> None:
        self.keys = keys
        self._admin = admin_key.encode("utf-8") if admin_key else None
        self._admin_record = KeyRecord(DEFAULT_WORKSPACE, "admin", key_id="admin", root=True)
        self._known: BoundedCache[str, KeyRecord] = BoundedCache(POSITIVE_MAX)
        self._unknown: BoundedCache[str, float] = BoundedCache(NEGATIVE_MAX)
        #: the secret of each hash read (remembered or not), so ``forget`` can find a changed principal's answer
        self._secrets: BoundedCache[str, str] = BoundedCache(POSITIVE_MAX + NEGATIVE_MAX)
        self._pending: dict[str, asyncio.Future] = {}
        self._busy_until = 0.0
        self._generation = 0

    async def by_id(self, key_id: str, workspace: str) -> KeyRecord | None:
        """The key with id ``key_id`` acting in ``workspace`` (a gateway-run batch's), read from the store; None
        once it is revoked (for ``admin``, the ``GATEWAY_ADMIN_KEY``: once that is unset)."""
        if key_id == self._admin_record.key_id:
            found = self._admin_record if self._admin is not None else None
        else:
            record = await self.keys.repo.find(key_id)
            found = None if record is None else KeyRecord(record.workspace_id, record.role, record.organisation_id,
                                                          record.id, record.root, record.held)
        if found is None or (found.workspace != workspace and not found.root):
            return None
        return KeyRecord(workspace, found.role, found.organisation, found.key_id, found.root, found.scopes)

    def known(self, secret: str) -> KeyRecord | None:
        """The key's record when memory already says (the admin key, a key found before); else None."""
        record = self._known.get(secret)
        if record is not None:
            return record
        if self._admin is not None and hmac.compare_digest(secret.encode("utf-8", "surrogatepass"), self._admin):
            self._remember(secret, self._admin_record)
            return self._admin_record
        return None

    async def lookup(self, secret: str) -> KeyRecord | None:
        """The key's record, or None for an unknown or revoked key; 503 while the store cannot answer in time."""
        record = self.known(secret)
        if record is not None:
            return record
        now = time.monotonic()
        if self._unknown.get(secret, 0.0) > now:
            return None
        pending = self._pending.get(secret)
        if pending is None:
            if self._busy_until > now:
                raise _busy("the state store did not answer a moment ago")
            if len(self._pending) >= LOOKUP_PENDING_MAX:
                raise _busy("too many gateway key lookups are waiting")
            pending = asyncio.ensure_future(self._read(secret, self._generation))
            self._pending[secret] = pending
            pending.add_done_callback(lambda done: self._settled(secret, done))
        try:
            return await within(asyncio.shield(pending), LOOKUP_WAIT_S)
        except (TimeoutError, StateStoreError):
            raise _busy("the state store is slow or unreachable") from None

    async def _read(self, secret: str, generation: int) -> KeyRecord | None:
        hash_ = key_hash(secret)
        try:
            record = await self.keys.principal_by_hash(hash_)
        except StateStoreError:
            self._busy_until = time.monotonic() + BUSY_BACKOFF_S
            raise
        if generation == self._generation:  # not when the records changed while reading: the answer may be stale
            self._secrets[hash_] = secret
            if record is None:
                self._unknown[secret] = time.monotonic() + NEGATIVE_TTL_S
            else:
                self._remember(secret, record)
        return record

    def _settled(self, secret: str, done: asyncio.Future) -> None:
        self._pending.pop(secret, None)
        if not done.cancelled():
            done.exception()  # retrieved here too: every waiter may have given up on it

    def _remember(self, secret: str, record: KeyRecord) -> None:
        self._known[secret] = record

    def forget(self, changed: Mapping[str, Collection[str]]) -> None:
        """Forget the answers for the secrets whose principals changed (``changed[SECRET_KIND]``: their hashes)."""
        self._generation += 1
        known, unknown, secrets_ = self._known, self._unknown, self._secrets
        for hash_ in changed.get(SECRET_KIND, ()):
            secret = secrets_.pop(hash_, "")
            if secret:
                if secret in known:
                    del known[secret]
                if secret in unknown:
                    del unknown[secret]
        self._busy_until = 0.0

    def invalidate(self) -> None:
        """Forget every answer (principals changed somewhere and which is not known)."""
        self._generation += 1
        self._known = BoundedCache(POSITIVE_MAX)
        self._unknown = BoundedCache(NEGATIVE_MAX)
        self._secrets = BoundedCache(POSITIVE_MAX + NEGATIVE_MAX)
        self._busy_until = 0.0

    def close(self) -> None:
        self.invalidate()


def _busy(why: str) -> ServiceUnavailable:
    return ServiceUnavailable(f"{why}; retry shortly", param="x-gateway-api-key", headers=[(b"retry-after", b"1")])
