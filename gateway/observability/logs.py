"""Request logs: masking of secrets, the JSON log entry built from a record, and where entries go (lines, SQLite).

Everything here runs off the request path (the recorder's background task, the writes in a thread), except
``attach_bodies``, which the pipeline calls only when ``GATEWAY_LOG_BODIES=1``.

Masking: the values of credential headers (``authorization``, ``x-api-key``, ``api-key``, ...), of headers named in
``x-gateway-sensitive-headers`` and of those in ``ORGANISATION_HEADERS_TO_MASK`` are replaced by
``sha256:<first 16 hex of their SHA-256>`` (an ``authorization`` value keeps its scheme: ``Bearer sha256:...``), and
any clear occurrence of those values in an error message or a logged body is replaced by the same hash. Gateway
headers (``x-gateway-*``, among them the gateway key and cloud credentials) are never logged. The (masked) request
headers are part of the entry for failed requests and with ``GATEWAY_LOG_BODIES=1``; a successful request's line
leaves them out (they cost a third of the per-record work and are rarely needed for a request that worked).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from datetime import datetime, timezone
from typing import Any, Iterable

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.http.context import client_headers
from gateway.observability.cost import Prices
from gateway.observability.estimate import estimate, relayed_text_chars, text_chars

#: header values that are credentials whatever the request says
ALWAYS_MASKED = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie"}
)
_SCHEMES = ("bearer ", "basic ", "token ")
_MIN_SECRET = 6  # shorter values are not searched for in free text (too many false hits)
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def hash_value(value: str) -> str:
    """``sha256:<first 16 hex>`` of a secret value: what logs show instead of it."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:16]


class Masker:
    """Masks credential and sensitive headers; remembers recent hashes (the same keys come back all the time)."""

    def __init__(self, organisation: Iterable[str] = ()) -> None:
        self.masked = ALWAYS_MASKED | frozenset(n.strip().lower() for n in organisation if n.strip())
        self._hashes: BoundedCache[str, str] = BoundedCache(4096)

    def hash(self, value: str) -> str:
        hashed = self._hashes.get(value)
        if hashed is None:
            hashed = self._hashes.put(value, hash_value(value))
        return hashed

    def headers(self, headers: dict[str, str] | None, sensitive: frozenset[str]) -> tuple[dict[str, str], list[str]]:
        """A masked copy of the headers and the clear secrets found in them (to scrub from free text)."""
        if not headers:
            return {}, []
        masked = self.masked
        out: dict[str, str] = {}
        secrets: list[str] = []
        for name, value in headers.items():
            if name in masked or name in sensitive:
                secret = value
                prefix = ""
                low = value[:7].lower()
                for scheme in _SCHEMES:
                    if low.startswith(scheme):
                        prefix, secret = value[: len(scheme)], value[len(scheme):].strip()
                        break
                out[name] = prefix + self.hash(secret)
                secrets.append(secret)
                if secret != value:
                    secrets.append(value)
            else:
                out[name] = value
        return out, secrets

    def scrub(self, text: str, secrets: list[str]) -> str:
        for secret in secrets:
            if len(secret) >= _MIN_SECRET and secret in text:
                text = text.replace(secret, self.hash(secret))
        return text

    def scrub_bytes(self, data: bytes, secrets: list[str]) -> bytes:
        for secret in secrets:
            raw = secret.encode("utf-8", "surrogateescape")
            if len(raw) >= _MIN_SECRET and raw in data:
                data = data.replace(raw, self.hash(secret).encode())
        return data


def attach_bodies(record: Any, state: Any, response_body: bytes | None) -> None:
    """Put the bodies on the record (pipeline, only with GATEWAY_LOG_BODIES=1): the request as the gateway decoded
    it and the JSON answer (streamed answers are not buffered, so not logged)."""
    if state is not None:
        try:
            record.request_body = _encode(state.params())
        except Exception:  # noqa: BLE001 - a body that does not decode is simply not logged
            pass
    if response_body is not None:
        record.response_body = response_body


def tokens(usage: Any) -> tuple[int, int, int]:
    """(input, output, total) tokens of a usage Struct or dict (0 when absent)."""
    if usage is None:
        return 0, 0, 0
    if isinstance(usage, dict):
        tin = usage.get("prompt_tokens") or usage.get("input_tokens") or 0
        tout = usage.get("completion_tokens") or usage.get("output_tokens") or 0
        total = usage.get("total_tokens") or 0
    else:
        tin = getattr(usage, "prompt_tokens", 0) or 0
        tout = getattr(usage, "completion_tokens", 0) or 0
        total = getattr(usage, "total_tokens", 0) or 0
    tin = tin if isinstance(tin, int) else 0
    tout = tout if isinstance(tout, int) else 0
    total = total if isinstance(total, int) else 0
    return tin, tout, total or tin + tout


def estimated_usage(rec: Any) -> Any:
    """The gateway's estimate for a record that asked for one (see ``gateway.observability.estimate``)."""
    if rec.answer is not None:
        chars = text_chars(rec.answer)
    else:
        chars = relayed_text_chars(rec.relayed_bytes, rec.relayed_events, rec.relayed_sample)
    return estimate(rec.request, chars)


def timings(rec: Any) -> tuple[float | None, float | None]:
    """(upstream seconds, gateway-added seconds) of a record.

    Upstream time is the answering exchange: to the parsed answer for JSON, to the stream's end for streams
    (None when the last upstream answered an error). The added time is total minus upstream, only for requests
    answered in one attempt (retries, fallbacks and backoff are not the gateway's overhead); a request that never
    reached an upstream is all gateway time.
    """
    upstream: float | None = None
    if rec.upstream_started:
        if rec.upstream_s:
            upstream = rec.upstream_s
        elif rec.stream and rec.ttft_s is not None:  # relayed, whether it ended well, broke off or was left
            upstream = max(0.0, rec.started + rec.total_s - rec.upstream_started)
    added: float | None = None
    if not rec.retries and not rec.fallbacks:
        if upstream is not None:
            added = max(0.0, rec.total_s - upstream)
        elif not rec.upstream_started:
            added = rec.total_s
    return upstream, added


class LogEntry(msgspec.Struct):
    """One request log line (and one ``GET /v1/logs`` item, which adds ``id``)."""

    time: str
    timestamp: float
    trace_id: str
    span_id: str | None
    parent_span_id: str | None
    span_name: str | None
    workspace: str | None
    endpoint: str
    provider: str | None
    model: str | None
    status: int
    stream: bool
    latency_ms: float
    upstream_latency_ms: float | None
    gateway_latency_ms: float | None
    ttft_ms: float | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    usage_source: str
    cost_usd: float
    cache_status: str
    retries: int
    fallbacks: int
    breaker_opens: int
    target: str | None
    metadata: dict[str, Any] | None
    error: str | None
    request_headers: Any = msgspec.UNSET
    request_body: Any = msgspec.UNSET
    response_body: Any = msgspec.UNSET


class Derived:
    """What the background task works out once per record and shares between logs, metrics and traces."""

    __slots__ = ("wall_start", "upstream_s", "added_s", "tokens_in", "tokens_out", "tokens_total", "cost",
                 "headers", "secrets")

    def __init__(self, rec: Any, wall_offset: float, masker: Masker, prices: Prices) -> None:
        self.wall_start = rec.started + wall_offset
        self.upstream_s, self.added_s = timings(rec)
        usage = rec.usage
        if usage is None and rec.usage_source == "estimated":
            usage = estimated_usage(rec)
        self.tokens_in, self.tokens_out, self.tokens_total = tokens(usage)
        self.cost = prices.cost_usd(rec.provider, rec.model, self.tokens_in, self.tokens_out)
        if rec.error is not None or rec.request_body is not None or rec.response_body is not None:
            # failed requests and verbose (GATEWAY_LOG_BODIES) logs carry the masked request headers; the clear
            # secrets found in them are scrubbed from the error text and bodies
            self.headers, self.secrets = masker.headers(client_headers(rec.request_headers or ()),
                                                        rec.sensitive_headers)
        else:
            self.headers, self.secrets = msgspec.UNSET, []


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _body(data: bytes | None, masker: Masker, secrets: list[str]) -> Any:
    if data is None:
        return msgspec.UNSET
    data = masker.scrub_bytes(data, secrets)
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return data.decode("utf-8", "replace")


_second: list[Any] = [None, ""]  # (unix second, its ISO text without the fraction), reused within a second


def iso_time(ts: float) -> str:
    """UTC ISO 8601 with milliseconds (``2025-01-31T12:00:00.123Z``)."""
    second = int(ts)
    if _second[0] != second:
        _second[0] = second
        _second[1] = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return "%s.%03dZ" % (_second[1], int((ts - second) * 1000))


def build_entry(rec: Any, d: Derived, masker: Masker) -> LogEntry:
    error = rec.error
    if error and d.secrets:
        error = masker.scrub(error, d.secrets)
    wall = d.wall_start
    return LogEntry(
        iso_time(wall), round(wall, 6), rec.trace_id, rec.span_id, rec.parent_span_id, rec.span_name,
        rec.workspace, rec.endpoint, rec.provider, rec.model, rec.status, rec.stream, round(rec.total_s * 1000, 3),
        _ms(d.upstream_s), _ms(d.added_s), _ms(rec.ttft_s), d.tokens_in, d.tokens_out, d.tokens_total,
        rec.usage_source,
        round(d.cost, 8), rec.cache_status, rec.retries, rec.fallbacks, rec.breaker_opens, rec.target_path,
        rec.metadata, error, d.headers,
        _body(rec.request_body, masker, d.secrets) if rec.request_body is not None else msgspec.UNSET,
        _body(rec.response_body, masker, d.secrets) if rec.response_body is not None else msgspec.UNSET,
    )


def encode_entry(entry: LogEntry) -> bytes:
    return _encode(entry)


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS request_logs ("
    " id INTEGER PRIMARY KEY, ts REAL NOT NULL, workspace TEXT, trace_id TEXT, status INTEGER, provider TEXT,"
    " doc BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS request_logs_workspace ON request_logs (workspace, id)",
    "CREATE INDEX IF NOT EXISTS request_logs_trace ON request_logs (trace_id)",
)
_INSERT = "INSERT INTO request_logs (ts, workspace, trace_id, status, provider, doc) VALUES (?, ?, ?, ?, ?, ?)"
_PRUNE = "DELETE FROM request_logs WHERE id <= (SELECT MAX(id) FROM request_logs) - ?"


class LogFilter(msgspec.Struct, frozen=True):
    """The filters of ``GET /v1/logs`` (validated by the handler)."""

    trace_id: str | None = None
    status: int | None = None
    status_class: int | None = None  # 2 for 2xx, ... 5 for 5xx
    provider: str | None = None
    model: str | None = None
    since: float | None = None
    until: float | None = None
    after: int | None = None
    limit: int = 20


class LogStore:
    """Request logs in SQLite (WAL) shared by every worker: batched inserts, bounded retention, paged reads.
    Every method blocks: call them in a thread."""

    def __init__(self, path: str, retention_rows: int = 100_000) -> None:
        self.path = path
        self.retention_rows = max(1, retention_rows)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._since_prune = 0

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        return conn

    def open(self) -> None:
        """Create the table (several workers may race here: retried while the file is locked)."""
        with self._lock:
            if self._conn is not None:
                return
            conn = self._connect()
            for attempt in range(50):
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    break
                except sqlite3.OperationalError:
                    if attempt == 49:
                        conn.close()
                        raise
                    time.sleep(0.05)
            self._conn = conn

    def insert(self, rows: list[tuple]) -> None:
        self.open()
        with self._lock:
            conn = self._conn
            assert conn is not None
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._since_prune += len(rows)
            if self._since_prune >= min(1000, self.retention_rows):
                self._since_prune = 0
                conn.execute(_PRUNE, (self.retention_rows,))

    def query(self, workspace: str | None, flt: LogFilter, every_workspace: bool = False
              ) -> tuple[list[tuple[int, bytes]], bool]:
        """The newest matching rows first, after the cursor; and whether more follow. ``every_workspace`` reads
        all workspaces' rows (``workspace`` is then ignored)."""
        sql = ["SELECT id, doc FROM request_logs WHERE 1" if every_workspace
               else "SELECT id, doc FROM request_logs WHERE workspace IS ?"]
        args: list[Any] = [] if every_workspace else [workspace]
        if flt.status_class is not None:
            sql.append("AND status >= ? AND status < ?")
            args += [flt.status_class * 100, flt.status_class * 100 + 100]
        if flt.model is not None:
            sql.append("AND json_extract(CAST(doc AS TEXT), '$.model') = ?")
            args.append(flt.model)
        for column, op, value in (
            ("trace_id", "=", flt.trace_id), ("status", "=", flt.status), ("provider", "=", flt.provider),
            ("ts", ">=", flt.since), ("ts", "<=", flt.until), ("id", "<", flt.after),
        ):
            if value is not None:
                sql.append(f"AND {column} {op} ?")
                args.append(value)
        sql.append("ORDER BY id DESC LIMIT ?")
        args.append(flt.limit + 1)
        self.open()
        conn = self._connect()  # readers use their own connection: WAL lets them run beside the writer
        try:
            rows = conn.execute(" ".join(sql), args).fetchall()
        finally:
            conn.close()
        return rows[: flt.limit], len(rows) > flt.limit

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_PIPE_BUF = 4096


class LineSink:
    """JSON lines to stdout (default), to a file (appended), or nowhere (``off``). Writes are whole lines of at
    most PIPE_BUF bytes where possible, so workers sharing stdout do not interleave inside a line. Blocking."""

    def __init__(self, target: str | None) -> None:
        target = (target or "").strip()
        self.enabled = target.lower() not in ("off", "none", "0", "false")
        self._fd: int | None = None
        self._owned = False
        if not self.enabled:
            return
        if target in ("", "-", "stdout"):
            self._fd = 1
        elif target == "stderr":
            self._fd = 2
        else:
            self._fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            self._owned = True

    def write(self, lines: list[bytes]) -> None:
        if self._fd is None or not lines:
            return
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            n = len(line) + 1
            if chunk and size + n > _PIPE_BUF:
                self._write_all(b"\n".join(chunk) + b"\n")
                chunk, size = [], 0
            chunk.append(line)
            size += n
        if chunk:
            self._write_all(b"\n".join(chunk) + b"\n")

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)  # type: ignore[arg-type]
            view = view[written:]

    def close(self) -> None:
        if self._owned and self._fd is not None:
            os.close(self._fd)
        self._fd = None
