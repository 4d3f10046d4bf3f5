"""``gateway keys create|list|revoke`` and the bootstrap key of ``gateway serve``: gateway keys without a server.

Both open the state store the settings name (the embedded store in the data directory, or Redis), so they work
whether or not a gateway is running; running gateways see the change within a second (records watcher).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Awaitable, Callable

import msgspec

from gateway.controlplane.keys import ROLES, SCOPES, ApiKeys, ensure_admin_key
from gateway.controlplane.records import DEFAULT_WORKSPACE
from gateway.http.errors import GatewayError
from gateway.settings import Settings
from gateway.state.base import StateStore, StateStoreError


async def _with_store(settings: Settings, work: Callable[[StateStore], Awaitable[Any]]) -> Any:
    from gateway.state.select import open_store

    store = open_store(settings)
    await store.start()
    try:
        return await work(store)
    finally:
        await store.close()


def bootstrap_admin_key(settings: Settings) -> str | None:
    """The generated root admin key to print once (None when GATEWAY_ADMIN_KEY is set or a root key exists).
    A store that cannot be reached is reported and skipped: the gateway still starts."""
    try:
        return asyncio.run(_with_store(settings, lambda store: ensure_admin_key(store, settings.admin_key)))
    except (StateStoreError, GatewayError) as exc:
        print(f"gateway: could not check for an admin key: {exc}", file=sys.stderr)
        return None


def add_parser(sub: Any) -> None:
    """Add ``keys`` and its subcommands to the CLI's subparsers."""
    keys = sub.add_parser("keys", help="create, list and revoke gateway keys (no running server needed)")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a key and print it once")
    create.add_argument("--name", required=True)
    create.add_argument("--role", choices=ROLES, default="member")
    create.add_argument("--workspace", default=DEFAULT_WORKSPACE, help="workspace id (default: default)")
    create.add_argument("--scopes", default=None, help=f"comma-separated, of: {', '.join(SCOPES)} "
                                                       "(default: the role's defaults)")
    create.add_argument("--rotation-period", default=None, help="days 1..365, weekly or monthly")
    create.add_argument("--root", action="store_true",
                        help="an organisation-wide admin that may act on any workspace (recovery)")
    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--workspace", default=None, help="one workspace (default: every workspace)")
    revoke = actions.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id")
    revoke.add_argument("--workspace", default=DEFAULT_WORKSPACE)


def _rotation(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


async def _run(args: argparse.Namespace, store: StateStore) -> int:
    keys = ApiKeys(store)
    if args.action == "create":
        if args.root and args.role != "admin":
            raise GatewayError("--root needs --role admin", param="role")
        scopes = [s.strip() for s in args.scopes.split(",") if s.strip()] if args.scopes is not None else None
        record, secret = await keys.create(name=args.name, role=args.role, workspace=args.workspace, scopes=scopes,
                                           rotation_period=_rotation(args.rotation_period), root=args.root)
        print(msgspec.json.encode(record.public(secret)).decode())
        return 0
    if args.action == "list":
        for record in await keys.list(args.workspace):
            print(f"{record.id}  {record.workspace_id}  {record.role:<6}  {record.key_prefix}…  {record.name}")
        return 0
    record = await keys.revoke(args.workspace, args.id)
    print(f"revoked {record.id} ({record.name})")
    return 0


def run(args: argparse.Namespace, settings: Settings) -> int:
    try:
        return asyncio.run(_with_store(settings, lambda store: _run(args, store)))
    except GatewayError as error:
        where = f" ({error.param})" if error.param else ""
        print(f"gateway keys: {error.message}{where}", file=sys.stderr)
        return 2
    except StateStoreError as exc:
        print(f"gateway keys: the state store is unavailable: {exc}", file=sys.stderr)
        return 1
