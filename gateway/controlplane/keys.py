"""Gateway keys: stored hashed in SQLite under the data directory, looked up with an in-process cache.

``GATEWAY_ADMIN_KEY`` is always accepted as an admin key of the default workspace. When it is unset and no key is
stored, ``ensure_admin_key`` (run once by ``gateway serve`` before workers start) generates one, stores its hash and
returns it so the CLI prints it once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time

from gateway.settings import Settings, data_path

DEFAULT_WORKSPACE = "default"
_NEGATIVE_TTL_S = 2.0


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRecord:
    """Who a gateway key is: its workspace and organisation, role (``admin`` or ``member``) and scopes.

    ``root`` marks the bootstrap admin key (``GATEWAY_ADMIN_KEY`` or the generated one): an organisation-wide
    admin that may act on any workspace by naming it; every other key acts in its own workspace only.
    """

    __slots__ = ("workspace", "role", "organisation", "key_id", "root", "scopes")

    def __init__(self, workspace: str, role: str, organisation: str = "default", key_id: str = "",
                 root: bool = False, scopes: frozenset[str] = frozenset()) -> None:
        self.workspace = workspace
        self.role = role
        self.organisation = organisation
        self.key_id = key_id
        self.root = root
        self.scopes = scopes


def _connect(settings: Settings) -> sqlite3.Connection:
    conn = sqlite3.connect(data_path(settings, "gateway.db"), timeout=5.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS gateway_keys ("
        " hash TEXT PRIMARY KEY, workspace TEXT NOT NULL, role TEXT NOT NULL, created_at REAL NOT NULL)"
    )
    return conn


def ensure_admin_key(settings: Settings) -> str | None:
    """Generate and store an admin key when none is configured or stored; return it (else None)."""
    if settings.admin_key:
        return None
    conn = _connect(settings)
    try:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT 1 FROM gateway_keys WHERE role = 'admin' LIMIT 1").fetchone()
        if row is not None:
            conn.execute("COMMIT")
            return None
        key = "gw-admin-" + secrets.token_urlsafe(32)
        conn.execute(
            "INSERT INTO gateway_keys (hash, workspace, role, created_at) VALUES (?, ?, 'admin', ?)",
            (key_hash(key), DEFAULT_WORKSPACE, time.time()),
        )
        conn.execute("COMMIT")
        return key
    finally:
        conn.close()


class KeyStore:
    """Answers "which workspace and role does this key have?"; positive answers cached for the process life."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._admin = settings.admin_key
        self._known: dict[str, KeyRecord] = {}
        self._unknown: dict[str, float] = {}
        self._conn: sqlite3.Connection | None = None

    def lookup(self, key: str) -> KeyRecord | None:
        record = self._known.get(key)
        if record is not None:
            return record
        if self._admin and hmac.compare_digest(key, self._admin):
            record = KeyRecord(DEFAULT_WORKSPACE, "admin", key_id="admin", root=True)
        else:
            now = time.monotonic()
            if self._unknown.get(key, 0.0) > now:
                return None
            record = self._from_db(key)
            if record is None:
                if len(self._unknown) > 10000:
                    self._unknown.clear()
                self._unknown[key] = now + _NEGATIVE_TTL_S
                return None
        if len(self._known) > 100000:
            self._known.clear()
        self._known[key] = record
        return record

    def _from_db(self, key: str) -> KeyRecord | None:
        if self._conn is None:
            self._conn = _connect(self.settings)
        row = self._conn.execute(
            "SELECT workspace, role FROM gateway_keys WHERE hash = ?", (key_hash(key),)
        ).fetchone()
        return KeyRecord(row[0], row[1], key_id="admin", root=True) if row else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
