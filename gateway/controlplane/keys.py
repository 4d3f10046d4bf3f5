"""Gateway keys: stored hashed in SQLite under the data directory, looked up off the event loop with caches.

``GATEWAY_ADMIN_KEY`` is always accepted as an admin key of the default workspace. When it is unset and no key is
stored, ``ensure_admin_key`` (run once by ``gateway serve`` before workers start) generates one, stores its hash and
returns it so the CLI prints it once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from gateway.bounded_cache import BoundedCache
from gateway.http.errors import ServiceUnavailable
from gateway.settings import Settings, data_path

DEFAULT_WORKSPACE = "default"
NEGATIVE_TTL_S = 2.0
NEGATIVE_MAX = 10_000
POSITIVE_MAX = 100_000
LOOKUP_THREADS = 2
LOOKUP_PENDING_MAX = 256
LOOKUP_WAIT_S = 1.0
LOOKUP_BUSY_TIMEOUT_S = 0.5
#: after SQLite said "locked", lookups answer 503 at once for this long instead of queueing behind the lock
BUSY_BACKOFF_S = 1.0


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
    """Answers "which workspace and role does this key have?" without ever blocking the event loop.

    ``known`` answers from memory (the admin key, keys seen before). ``lookup`` also asks SQLite, in a small
    thread pool: the same key asked for by several requests at once is one query; at most LOOKUP_PENDING_MAX
    queries wait at a time and a request waits at most LOOKUP_WAIT_S (SQLite's own busy timeout is
    LOOKUP_BUSY_TIMEOUT_S). A writer holding the key table therefore costs an unknown key a 503 (retry shortly)
    and never stalls anything else; once SQLite has said "locked", lookups answer 503 at once for BUSY_BACKOFF_S.
    Keys found stay cached for the process life, keys not found for NEGATIVE_TTL_S (both bounded).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._admin = settings.admin_key.encode("utf-8") if settings.admin_key else None
        self._known: BoundedCache[str, KeyRecord] = BoundedCache(POSITIVE_MAX)
        self._unknown: BoundedCache[str, float] = BoundedCache(NEGATIVE_MAX)
        self._pending: dict[str, asyncio.Future] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._busy_until = 0.0

    def known(self, key: str) -> KeyRecord | None:
        """The key's record when memory already says (the admin key, a key found before); else None."""
        record = self._known.get(key)
        if record is not None:
            return record
        if self._admin is not None and hmac.compare_digest(_raw(key), self._admin):
            record = KeyRecord(DEFAULT_WORKSPACE, "admin", key_id="admin", root=True)
            self._remember(key, record)
            return record
        return None

    async def lookup(self, key: str) -> KeyRecord | None:
        """The key's record, or None for an unknown key; ServiceUnavailable (503) when the store is busy."""
        record = self.known(key)
        if record is not None:
            return record
        now = time.monotonic()
        if self._unknown.get(key, 0.0) > now:
            return None
        pending = self._pending.get(key)
        if pending is None:
            if self._busy_until > now:
                raise _busy("the gateway key store is busy")
            if len(self._pending) >= LOOKUP_PENDING_MAX:
                raise _busy("too many gateway key lookups are waiting")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="gateway-keys")
            pending = asyncio.get_running_loop().run_in_executor(self._pool, self._from_db, key)
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._settled(key, done))
        try:
            record = await asyncio.wait_for(asyncio.shield(pending), LOOKUP_WAIT_S)
        except (TimeoutError, sqlite3.Error):
            raise _busy("the gateway key store is busy") from None
        if record is None:
            self._unknown[key] = time.monotonic() + NEGATIVE_TTL_S
            return None
        self._remember(key, record)
        return record

    def _settled(self, key: str, done: asyncio.Future) -> None:
        self._pending.pop(key, None)
        if not done.cancelled():
            done.exception()  # read here too: every waiter may have given up on it

    def _remember(self, key: str, record: KeyRecord) -> None:
        self._known[key] = record

    def _from_db(self, key: str) -> KeyRecord | None:
        """In a pool thread: one indexed read on that thread's own connection."""
        if self._busy_until > time.monotonic():
            raise sqlite3.OperationalError("database is locked")  # queued behind a lock just seen: fail fast
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(data_path(self.settings, "gateway.db"), timeout=LOOKUP_BUSY_TIMEOUT_S,
                                   isolation_level=None, check_same_thread=False)
            with self._conns_lock:
                self._conns.append(conn)
            self._local.conn = conn
        try:
            row = conn.execute("SELECT workspace, role FROM gateway_keys WHERE hash = ?", (key_hash(key),)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None  # nothing was ever stored
            self._busy_until = time.monotonic() + BUSY_BACKOFF_S
            raise
        return KeyRecord(row[0], row[1], key_id="admin", root=True) if row else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass


def _raw(key: str) -> bytes:
    """The key's bytes as they came in the header (header values are decoded as latin-1)."""
    try:
        return key.encode("latin-1")
    except UnicodeEncodeError:
        return key.encode("utf-8", "surrogatepass")


def _busy(why: str) -> ServiceUnavailable:
    return ServiceUnavailable(f"{why}; retry shortly", param="x-gateway-api-key", headers=[(b"retry-after", b"1")])
