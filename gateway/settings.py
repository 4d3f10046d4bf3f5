"""Every GATEWAY_* setting (and the standard proxy variables) in one msgspec Struct, read once at start."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

_TRUE = {"1", "true", "yes", "on"}


def env_bool(value: str | None) -> bool:
    """Conventions: 1/true/yes/on are true, anything else (0, false, empty, unset) is false."""
    return (value or "").strip().lower() in _TRUE


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "gateway")


def split_names(value: str | None) -> tuple[str, ...]:
    """A comma-separated list, trimmed, empties dropped."""
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


class Settings(msgspec.Struct, frozen=True):
    """The gateway's settings. Field ``x`` comes from ``GATEWAY_X`` (see ``ENV``)."""

    host: str = "127.0.0.1"
    port: int = 8787
    workers: int = 1
    admin_key: str | None = None
    data_dir: str = ""
    redis_url: str | None = None
    allow_private_hosts: tuple[str, ...] = ()
    max_body_bytes: int = 32 * 1024 * 1024
    # upstream client
    upstream_connect_timeout_ms: int = 10_000
    upstream_read_timeout_ms: int = 600_000
    request_timeout_ms: int | None = None
    pool_size_per_host: int = 0
    pool_size: int = 0
    pool_keepalive_s: float = 60.0
    retry_after_max_ms: int = 60_000
    # outbound proxies: the standard HTTP_PROXY / HTTPS_PROXY / NO_PROXY variables (lower-case spellings too)
    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: tuple[str, ...] = ()
    # serving
    backlog: int = 2048
    shutdown_grace_s: float = 30.0
    log_level: str = "info"
    # observability
    log_bodies: bool = False
    log_file: str | None = None  # JSON request-log lines: unset/"-" = stdout, a path = appended, "off" = none
    log_retention_rows: int = 100_000  # request logs kept in <data_dir>/logs.db (newest rows)
    metrics_public: bool = False
    otlp_endpoint: str | None = None
    console: bool = True  # the web console at /console and its read-only API routes; off removes them
    organisation_headers_to_mask: tuple[str, ...] = ()
    no_extensions: bool = False
    # guardrails
    guardrail_workers: int = 2  # threads for CPU-heavy checks (large inputs, large JSON schemas)
    guardrail_queue: int = 64  # such checks waiting or running per worker process; beyond, a check fails
    guardrail_async_max: int = 256  # async hooks running in the background per worker process; beyond, dropped
    # files and batches
    files_dir: str | None = None  # gateway-stored files; unset: <data_dir>/files, or chunks in Redis with redis_url
    file_max_bytes: int = 200 * 1024 * 1024  # largest upload (gateway-stored or forwarded)
    batch_concurrency: int = 16  # lines of one gateway-run batch in flight at once
    batch_max_lines: int = 50_000  # lines a gateway-run batch's input file may hold
    batch_line_attempts: int = 3  # tries of a line that meets a 429 or 5xx (beyond its config's own retries)
    batch_lease_ms: int = 15_000  # a runner's lease on its batch; another instance takes over when it lapses
    batch_poll_ms: int = 1000  # how often each worker looks for batches to run, and runners for cancels
    batch_window_s: int = 86_400  # how long an `immediate` batch may run before it expires
    # shared state: Redis when redis_url is set, else the embedded SQLite store in data_dir
    redis_key_prefix: str = "gw:"
    redis_max_connections: int = 64
    state_timeout_ms: int = 500  # one Redis call (connect, read, pooled connection) or one SQLite lock wait
    state_fail_mode: str = "open"  # limits while the store is unreachable: open (admit) or closed (refuse)
    state_probe_interval_ms: int = 1000
    state_watch_interval_ms: int = 250
    state_cache_max_entries: int = 10_000
    state_cache_max_bytes: int = 256 * 1024 * 1024
    # semantic cache (gateway/cache): the cosine a paraphrase must reach with the packaged model, and the
    # embedding pool (threads; texts that may wait for one before a lookup is skipped as a MISS)
    semantic_cache_threshold: float = 0.89
    semantic_cache_threads: int = 1
    semantic_cache_queue: int = 16
    # usage and rate limit policies
    policy_output_tokens: int = 1024  # output tokens reserved for a request that sets no max_tokens
    policy_reservation_ttl_ms: int = 900_000  # an unsettled token/cost reservation is released after this


#: field -> environment variable
ENV: dict[str, str] = {name: f"GATEWAY_{name.upper()}" for name in Settings.__struct_fields__}
ENV["organisation_headers_to_mask"] = "ORGANISATION_HEADERS_TO_MASK"
#: settings read from the standard, unprefixed variable names (each also in its lower-case spelling)
STANDARD_NAMES = ("http_proxy", "https_proxy", "no_proxy")
for _name in STANDARD_NAMES:
    ENV[_name] = _name.upper()


def load(environ: dict[str, str] | os._Environ | None = None) -> Settings:
    """Read the settings from the environment; bad values raise ValueError naming the variable."""
    environ = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for name, field_type in zip(Settings.__struct_fields__, _field_types()):
        var = ENV[name]
        raw = environ.get(var)
        if name == "request_timeout_ms" and raw is None:
            raw = environ.get("REQUEST_TIMEOUT")  # the spec's self-hosted setting name
        elif name in STANDARD_NAMES and raw is None:
            raw = environ.get(name)  # curl and most tools also read http_proxy, https_proxy, no_proxy
        if raw is None or raw == "":
            continue
        try:
            values[name] = _convert(raw, field_type)
        except ValueError as exc:
            raise ValueError(f"{var}: {exc}") from None
    values.setdefault("data_dir", default_data_dir())
    settings = Settings(**values)  # type: ignore[arg-type]
    if settings.max_body_bytes <= 0:
        raise ValueError("GATEWAY_MAX_BODY_BYTES: must be > 0")
    if settings.workers < 1:
        raise ValueError("GATEWAY_WORKERS: must be >= 1")
    if settings.log_retention_rows < 1:
        raise ValueError("GATEWAY_LOG_RETENTION_ROWS: must be >= 1")
    for name in ("guardrail_workers", "guardrail_queue", "guardrail_async_max", "file_max_bytes",
                 "batch_concurrency", "batch_max_lines", "batch_line_attempts", "batch_lease_ms", "batch_poll_ms",
                 "batch_window_s"):
        if getattr(settings, name) < 1:
            raise ValueError(f"{ENV[name]}: must be >= 1")
    _check_state(settings)
    if not 0.0 < settings.semantic_cache_threshold <= 1.0:
        raise ValueError("GATEWAY_SEMANTIC_CACHE_THRESHOLD: must be > 0 and <= 1")
    if settings.semantic_cache_threads < 1:
        raise ValueError("GATEWAY_SEMANTIC_CACHE_THREADS: must be >= 1")
    if settings.semantic_cache_queue < 0:
        raise ValueError("GATEWAY_SEMANTIC_CACHE_QUEUE: must be >= 0")
    return settings


def _check_state(settings: Settings) -> None:
    if settings.state_fail_mode not in ("open", "closed"):
        raise ValueError(f"GATEWAY_STATE_FAIL_MODE: open or closed, got {settings.state_fail_mode!r}")
    for name in ("state_timeout_ms", "state_probe_interval_ms", "state_watch_interval_ms", "redis_max_connections",
                 "state_cache_max_entries", "state_cache_max_bytes", "policy_reservation_ttl_ms"):
        if getattr(settings, name) < 1:
            raise ValueError(f"{ENV[name]}: must be >= 1")
    if settings.policy_output_tokens < 0:
        raise ValueError("GATEWAY_POLICY_OUTPUT_TOKENS: must be >= 0")
    if "{" in settings.redis_key_prefix or "}" in settings.redis_key_prefix:
        raise ValueError("GATEWAY_REDIS_KEY_PREFIX: may not contain braces")


def _field_types() -> list[str]:
    hints = Settings.__annotations__
    return [hints[name] for name in Settings.__struct_fields__]


def _convert(raw: str, field_type: str) -> object:
    if field_type == "bool":
        return env_bool(raw)
    if field_type.startswith("int"):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
    if field_type.startswith("float"):
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
    if field_type.startswith("tuple"):
        return split_names(raw)
    return raw


_current: Settings | None = None


def get() -> Settings:
    """The process's settings, read on first use."""
    global _current
    if _current is None:
        _current = load()
    return _current


def reset() -> None:
    """Forget the cached settings (tests)."""
    global _current
    _current = None


def data_path(settings: Settings, *parts: str) -> Path:
    path = Path(settings.data_dir).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path.joinpath(*parts)
