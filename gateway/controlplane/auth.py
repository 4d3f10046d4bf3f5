"""The one way every route learns who is calling: the gateway key's credential forms, the refusals' messages, and
the role, root and scope checks a route asks for (what users read: docs/http-api.md#the-gateway-key).

The credential forms are the same on every route:

1. ``x-gateway-api-key`` (or its snake_case and camelCase spellings, read by ``gateway/http/context.py``);
2. without it, ``Authorization: Bearer <gateway key>``: the bearer is then the gateway key and is taken off the
   request (``ctx.bearer`` becomes None), so it never reaches a provider; the provider credential then comes from a
   provider slug or a saved config. With ``x-gateway-api-key`` present the bearer stays the provider's token (the
   spec's "provider name + Authorization").

(The anthropic-style door also takes ``x-api-key`` where the anthropic SDK puts its key; it turns that into these
forms before authenticating: ``gateway/pipeline/dialects/door.py``.) A request the gateway runs in process (a line of
a gateway-run batch) carries its key's record instead, which the caller hands in as ``record``.
"""

from __future__ import annotations

from gateway.controlplane.keys import KeyRecord, KeyStore, missing_scope
from gateway.http.context import RequestContext
from gateway.http.errors import Forbidden, Unauthorized

PARAM = "x-gateway-api-key"
MISSING = "missing gateway key: send x-gateway-api-key, or Authorization: Bearer <gateway key> without it"
UNKNOWN = "unknown or revoked gateway key"
NOT_ADMIN = "this route needs an admin gateway key; this key's role is member"
#: what a request whose bearer is its gateway key adds to its sensitive headers: never forwarded upstream, even when
#: ``x-gateway-forward-headers`` or a config's ``forward_headers`` names it, and hashed wherever logged
BEARER_IS_THE_KEY = frozenset({"authorization"})
NOT_ROOT = ("this route shows every workspace's data: it needs a root admin key (GATEWAY_ADMIN_KEY, the generated "
            "bootstrap key or one made with gateway keys create --root)")


def presented_key(ctx: RequestContext) -> str | None:
    """The gateway key ``ctx``'s request presents (the forms above), the bearer taken off the request when it is
    the one (and its header made sensitive, so no forward list sends it upstream); None without either."""
    key = ctx.api_key
    if key:
        return key
    key = ctx.bearer
    if not key:
        return None
    ctx.api_key, ctx.bearer = key, None
    ctx.sensitive_headers = ctx.sensitive_headers | BEARER_IS_THE_KEY
    return key


def check_access(record: KeyRecord, scope: str | None = None, *, admin: bool = False, root: bool = False) -> None:
    """403 unless ``record`` has the admin role (``admin``), is a root key (``root``) and holds ``scope``; the
    403 of a missing scope has code ``missing_scope`` and names it."""
    if admin and record.role != "admin":
        raise Forbidden(NOT_ADMIN, param=PARAM, code="missing_role")
    if root and not record.root:
        raise Forbidden(NOT_ROOT, param=PARAM, code="missing_role")
    if scope is not None and scope not in record.scopes:
        raise missing_scope(scope)


async def authenticate(keys: KeyStore, ctx: RequestContext, scope: str | None = None, *, admin: bool = False,
                       root: bool = False, record: KeyRecord | None = None) -> KeyRecord:
    """The caller's key record, its workspace set on ``ctx``: 401 without a gateway key or with an unknown or
    revoked one, 403 as ``check_access`` says; 503 while the state store cannot tell (``KeyStore.lookup``).
    ``record``: the key of an in-process request, already known. Never blocks the event loop."""
    if record is None:
        secret = presented_key(ctx)
        if not secret:
            raise Unauthorized(MISSING, param=PARAM)
        record = await keys.lookup(secret)
        if record is None:
            raise Unauthorized(UNKNOWN, param=PARAM)
    check_access(record, scope, admin=admin, root=root)
    ctx.workspace = record.workspace
    return record
