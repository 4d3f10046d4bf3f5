"""``gateway logs migrate``: apply the PostgreSQL log store's schema migrations now (for ops who apply them before
rolling out the gateway, or with a role that may create tables while the gateway's may not). Reads
``GATEWAY_LOG_STORE_URL`` like the server; safe to run while gateways start (the migrations' advisory lock)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from gateway.settings import Settings


def add_parser(sub: Any) -> None:
    logs = sub.add_parser("logs", help="the PostgreSQL request-log store (GATEWAY_LOG_STORE_URL)")
    actions = logs.add_subparsers(dest="action", required=True)
    actions.add_parser("migrate", help="apply the log store's schema migrations and exit")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.log_store_url:
        print("gateway logs migrate: GATEWAY_LOG_STORE_URL is not set", file=sys.stderr)
        return 2
    from gateway.observability.pglog.migrations import LATEST
    from gateway.observability.pglog.store import PgLogStore

    try:
        applied = asyncio.run(PgLogStore(settings.log_store_url).migrate())
    except Exception as exc:  # noqa: BLE001 - a one-line reason, never the URL
        print(f"gateway logs migrate: failed: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 1
    done = ", ".join(map(str, applied)) if applied else "none (already up to date)"
    print(f"gateway logs migrate: schema version {LATEST}; applied: {done}")
    return 0
