"""Every setting in one msgspec Struct: read once at start from ``GATEWAY_*`` variables (and the standard proxy
variables) and the ``gateway serve`` flags.

This module is the only one that reads the environment. Each field of ``Settings`` is one setting; its
``Annotated`` metadata (built with ``setting(...)``) is its help text and says whether it is a secret. From that
one definition come

- the variable: ``GATEWAY_<FIELD NAME>`` (or the ``env=`` given), read by ``load``;
- the flag: ``--<field-name>`` on ``gateway serve`` for every setting that is not a secret (``gateway.cli``
  generates them from ``FIELDS``; secrets stay environment-only because flags show in ``ps``);
- the help text: the variable and the default.

Adding a setting is one line here; ``python -m gateway.settings --markdown`` prints the table of docs/operations.md
from ``FIELDS`` (a test keeps the two in step). Values are decoded with ``msgspec.convert(...,
strict=False)``: numbers from text, constraints from the metadata (``ge=1``...). Booleans read ``1``, ``true``,
``yes``, ``on`` as true and anything else as false; tuples are comma-separated lists; an empty variable is unset.

Code gets the settings as an argument (``Runtime(settings)`` and what it builds), never from a global. Granian's
workers are separate processes: ``gateway serve`` parses the environment and flags once, then
``hand_to_workers`` puts the result, as JSON, in one variable (``GATEWAY_SERVE_SETTINGS``) that the workers inherit;
``for_worker`` decodes it (and falls back to ``load()`` for a worker started by other means).
"""

from __future__ import annotations

import os
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import msgspec

from gateway.http.fields import problem_words, read_fault
from gateway.log_store_url import check_log_store_url
from gateway.redis_url import check_redis_url

_TRUE = {"1", "true", "yes", "on"}
#: where ``gateway serve`` leaves the parsed settings for its worker processes
HANDOFF_ENV = "GATEWAY_SERVE_SETTINGS"
#: the server's log levels
LogLevel = Literal["critical", "error", "warning", "warn", "info", "debug", "notset"]


def env_bool(value: str | None) -> bool:
    """Conventions: 1/true/yes/on are true, anything else (0, false, empty, unset) is false."""
    return (value or "").strip().lower() in _TRUE


def split_names(value: str | None) -> tuple[str, ...]:
    """A comma-separated list, trimmed, empties dropped."""
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "gateway")


def setting(help: str, *, secret: bool = False, env: str | None = None, aliases: tuple[str, ...] = (),
            shown: str | None = None, **constraints: Any) -> msgspec.Meta:
    """The description of one setting, for its ``Annotated`` type: help text; ``secret=True`` for values that must
    never be a flag (keys, URLs that may hold a password); ``env`` when its variable is not ``GATEWAY_<NAME>``;
    ``aliases``: more variables read when the main one is unset; ``shown``: the default as the docs describe it,
    for a default computed at start; ``constraints``: msgspec.Meta checks (``ge=1``)."""
    extra: dict[str, Any] = {}
    if shown:
        extra["shown"] = shown
    if secret:
        extra["secret"] = True
    if env:
        extra["env"] = env
    if aliases:
        extra["aliases"] = aliases
    return msgspec.Meta(description=help, extra=extra, **constraints)


#: the serving defaults: connections waiting to be accepted, and requests (streams) one worker serves at once
BACKLOG = 4096
BACKPRESSURE = 16_384


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The gateway's settings. Field ``x`` comes from ``GATEWAY_X`` (see ``FIELDS``)."""

    host: Annotated[str, setting("bind address")] = "127.0.0.1"
    port: Annotated[int, setting("port")] = 8787
    workers: Annotated[int, setting("worker processes", ge=1)] = 1
    admin_key: Annotated[str | None, setting(
        "the root admin key (full rights, any workspace); when unset and no root key is stored, gateway serve "
        "generates one, stores its hash in the state store and prints it once", secret=True)] = None
    secret_key: Annotated[str | None, setting(
        "encrypts provider-slug secrets and gateway-run batches' request headers at rest (any long random text); "
        "unset: a key generated once into <data dir>/secret.key. Instances sharing Redis must set the same value",
        secret=True)] = None
    data_dir: Annotated[str, setting("where the embedded store keeps its files (SQLite)",
                                     shown="$XDG_DATA_HOME/gateway, else ~/.local/share/gateway")] = msgspec.field(
        default_factory=default_data_dir)
    redis_url: Annotated[str | None, setting(
        "shared state in Redis (redis://, rediss://) or Redis Cluster (redis+cluster://host:port,...); unset: the "
        "embedded store in the data directory", secret=True)] = None
    allow_private_hosts: Annotated[tuple[str, ...], setting(
        "comma-separated host names, addresses or CIDRs that upstreams may use although private or loopback (local "
        "models and tests need 127.0.0.1,localhost)")] = ()
    max_body_bytes: Annotated[int, setting("larger request bodies get 413", gt=0)] = 32 * 1024 * 1024
    body_timeout_ms: Annotated[int, setting(
        "longest time a request body may take to arrive, counted from when the gateway begins to read it (408 "
        "after it)", gt=0)] = 60_000
    # upstream client
    upstream_connect_timeout_ms: Annotated[int, setting(
        "connect timeout per upstream attempt (504 when it runs out)")] = 10_000
    upstream_read_timeout_ms: Annotated[int, setting("longest silence while reading an upstream answer (504)")] = (
        600_000)
    max_upstream_body_bytes: Annotated[int, setting(
        "largest upstream answer the gateway reads whole (JSON answers, error bodies, model lists, token exchanges), "
        "counted decompressed; a larger one is a 502 and its connection is dropped (streams and media are relayed, "
        "not bounded)", gt=0)] = 128 * 1024 * 1024
    request_timeout_ms: Annotated[int | None, setting("default request_timeout for every request (408)",
                                                      aliases=("REQUEST_TIMEOUT",))] = None
    # MCP gateway
    mcp_timeout_ms: Annotated[int, setting(
        "longest wait for an MCP server to start answering a request (a JSON-RPC error after it); a streamed answer "
        "may then fall silent for GATEWAY_UPSTREAM_READ_TIMEOUT_MS", gt=0)] = 60_000
    mcp_list_ttl_ms: Annotated[int, setting(
        "how long an MCP server's tool, prompt and resource lists are reused before they are read again: a tool "
        "whose definition changed upstream is withheld at most this long after the change", gt=0, le=60_000)] = 30_000
    mcp_session_ttl_ms: Annotated[int, setting(
        "how long an idle handshake-era (2025-11-25) MCP client session lives in the state store", gt=0)] = 86_400_000
    # A2A agents (docs/agents.md)
    public_url: Annotated[str | None, setting(
        "the gateway's base URL as its clients reach it (scheme, host, an optional path prefix; e.g. "
        "https://gateway.example.com), used where the gateway names its own address: the endpoint in the agent cards "
        "it serves. Unset: each request's X-Forwarded-Proto and X-Forwarded-Host, else its scheme and Host")] = None
    agent_timeout_ms: Annotated[int, setting(
        "longest wait for an A2A agent to start answering a call (a JSON-RPC error after it); a streamed answer may "
        "then fall silent for GATEWAY_UPSTREAM_READ_TIMEOUT_MS", gt=0)] = 300_000
    # Realtime sessions (docs/websockets.md)
    realtime_max_message_bytes: Annotated[int, setting(
        "largest WebSocket message a Realtime session relays either way; a larger one closes the session with 1009",
        gt=0)] = 16 * 1024 * 1024
    realtime_idle_timeout_ms: Annotated[int, setting(
        "a Realtime session with no message either way for this long is closed with 1001", gt=0)] = 600_000
    upstream_transport: Annotated[Literal["lean", "aiohttp"], setting(
        "how request-path calls reach upstreams: lean (a keep-alive pool of loop transports, llhttp parsing; proxied "
        "upstreams and streamed uploads still go through aiohttp) or aiohttp (every call through aiohttp's "
        "client)")] = "lean"
    pool_size_per_host: Annotated[int, setting("upstream connections per worker and upstream host (0: no limit)")] = 0
    pool_size: Annotated[int, setting("upstream connections per worker (0: no limit)")] = 0
    pool_keepalive_s: Annotated[float, setting("idle keep-alive of pooled upstream connections")] = 60.0
    retry_after_max_ms: Annotated[int, setting(
        "longest provider Retry-After the gateway waits; longer asks give the target up at once")] = 60_000
    # outbound proxies: the standard variables, also in their lower-case spellings as curl reads them; a proxy URL
    # may hold user:password, so both are secrets
    http_proxy: Annotated[str | None, setting("proxy for http:// upstreams", secret=True, env="HTTP_PROXY",
                                              aliases=("http_proxy",))] = None
    https_proxy: Annotated[str | None, setting("proxy for https:// upstreams (a CONNECT tunnel)", secret=True,
                                               env="HTTPS_PROXY", aliases=("https_proxy",))] = None
    no_proxy: Annotated[tuple[str, ...], setting(
        "comma-separated hosts, domains, addresses or CIDRs (optionally :port, or *) called directly",
        env="NO_PROXY", aliases=("no_proxy",))] = ()
    # serving
    backlog: Annotated[int, setting(
        "listen backlog: connections waiting to be accepted (the kernel caps it at net.core.somaxconn)",
        ge=1)] = BACKLOG
    backpressure: Annotated[int, setting(
        "requests and streams one worker serves at once; more wait to be accepted. Each needs two open files: "
        "gateway serve raises the open-files limit to match, or lowers this to what the limit allows and says so",
        ge=1)] = BACKPRESSURE
    shutdown_grace_s: Annotated[float, setting("how long SIGTERM waits for in-flight requests and streams")] = 30.0
    log_level: Annotated[LogLevel, setting("server log level")] = "info"
    # observability
    log_bodies: Annotated[bool, setting("put request and response bodies in request logs")] = False
    log_file: Annotated[str | None, setting(
        "JSON request-log lines: unset or - for stdout, a path to append to, off for none")] = None
    log_retention_rows: Annotated[int, setting(
        "request logs kept in <data dir>/logs.db (newest rows) for GET /v1/logs", ge=1)] = (
        100_000)
    log_store_url: Annotated[str | None, setting(
        "request logs and their rollups in PostgreSQL (postgresql://user:password@host:5432/db) instead of "
        "<data dir>/logs.db, shared by every instance", secret=True)] = None
    log_retention_days: Annotated[int, setting("days of request logs kept in PostgreSQL (whole days dropped)",
                                               ge=1)] = 30
    log_spool_max_bytes: Annotated[int, setting(
        "bytes of request records each worker spools under <data dir>/log-spool while PostgreSQL is away; beyond, "
        "records are dropped and counted", ge=1)] = 1024 * 1024 * 1024
    metrics_public: Annotated[bool, setting("serve /metrics without the admin key")] = False
    otlp_endpoint: Annotated[str | None, setting("OTLP/HTTP base URL; spans go to <base>/v1/traces")] = None
    console: Annotated[bool, setting(
        "serve the web console at /console with /v1/logs/stream, /v1/logs/aggregates and /v1/configs/validate; off "
        "removes those routes (on by default: the page shows nothing without a gateway key)")] = (
        True)
    organisation_headers_to_mask: Annotated[tuple[str, ...], setting(
        "comma-separated header names masked (hashed) in every log, organisation-wide, and never forwarded",
        env="ORGANISATION_HEADERS_TO_MASK")] = ()
    no_extensions: Annotated[bool, setting(
        "use the pure-Python twins instead of the compiled speedups (also at build time: skips compiling)")] = False
    # guardrails
    guardrail_workers: Annotated[int, setting(
        "threads per worker for guardrail checks on large inputs (large text, large JSON schemas)", ge=1)] = 2
    guardrail_queue: Annotated[int, setting(
        "such checks waiting or running at once per worker; beyond it a check is not run and fails", ge=1)] = 64
    guardrail_async_max: Annotated[int, setting(
        "async hooks running in the background per worker; beyond it new ones are dropped (logged)", ge=1)] = 256
    # files and batches
    files_dir: Annotated[str | None, setting(
        "where gateway-stored files live. Unset: <data dir>/files on the embedded store; with GATEWAY_REDIS_URL, in "
        "Redis (1 MiB chunks) so every instance reads them. Set it to a directory every instance mounts to keep file "
        "bytes out of Redis")] = None
    file_max_bytes: Annotated[int, setting(
        "largest file upload, stored by the gateway or forwarded to a provider (413 above); uploads stream to disk, "
        "never whole into memory", ge=1)] = (
        200 * 1024 * 1024)
    batch_concurrency: Annotated[int, setting("lines of one gateway-run batch in flight at once", ge=1)] = 16
    batch_max_lines: Annotated[int, setting(
        "requests a gateway-run batch's input file may hold (more: the batch fails)", ge=1)] = 50_000
    batch_line_attempts: Annotated[int, setting(
        "tries of a batch line that meets a 408, 429 or 5xx (on top of its config's own retry) before that answer is "
        "its result", ge=1)] = 3
    batch_lease_ms: Annotated[int, setting(
        "a batch runner's lease; when its holder dies another worker or instance takes the batch over after this long",
        ge=1)] = 15_000
    batch_poll_ms: Annotated[int, setting(
        "how often each worker looks for batches to run, and each runner for a cancel, the window's end and its lease",
        ge=1)] = 1000
    batch_window_s: Annotated[int, setting("how long an immediate batch may run before it expires", ge=1)] = 86_400
    # shared state: Redis when redis_url is set, else the embedded SQLite store in data_dir
    redis_key_prefix: Annotated[str, setting(
        "prefix of every Redis key the gateway writes (no braces); lets several gateways share one Redis",
        pattern=r"^[^{}]*$")] = "gw:"
    redis_max_connections: Annotated[int, setting("Redis connections per worker (per cluster node)", ge=1)] = 64
    state_timeout_ms: Annotated[int, setting(
        "longest wait of one state-store call: a Redis connect, reply or free pooled connection, or an embedded-store "
        "lock", ge=1)] = 500
    state_fail_mode: Annotated[Literal["open", "closed"], setting(
        "limits while the state store is unreachable: open admits, closed refuses (and /ready answers 503)")] = "open"
    state_probe_interval_ms: Annotated[int, setting(
        "how often each worker checks that Redis answers (and reconnects)", ge=1)] = 1000
    state_watch_interval_ms: Annotated[int, setting(
        "how often each worker looks for changed control-plane records", ge=1)] = 250
    state_cache_max_entries: Annotated[int, setting(
        "response-cache entries kept by the embedded store (least recently used go first)", ge=1)] = 10_000
    state_cache_max_bytes: Annotated[int, setting("response-cache bytes kept by the embedded store", ge=1)] = (
        256 * 1024 * 1024)
    # semantic cache (gateway/cache): the cosine a paraphrase must reach with the packaged model, and the
    # embedding pool (threads; texts that may wait for one before a lookup is skipped as a MISS)
    semantic_cache_threshold: Annotated[float, setting(
        "cosine similarity a prompt must reach with a cached one for a semantic hit (measured for the packaged model)",
        gt=0, le=1)] = 0.89
    semantic_cache_threads: Annotated[int, setting("threads embedding prompts per worker", ge=1)] = 1
    semantic_cache_queue: Annotated[int, setting(
        "prompts that may wait for an embedding thread; past that the semantic lookup is skipped (a MISS)", ge=0)] = 16
    semantic_cache_embeddings: Annotated[str, setting(
        "where semantic-cache embeddings come from: local (the packaged model) or a gateway config (JSON, as in "
        "x-gateway-config) naming an embeddings provider, called through the gateway itself", secret=True,
        pattern=r"^\s*(local\s*$|\{)")] = "local"
    semantic_cache_embedding_model: Annotated[str, setting(
        "the model asked for embeddings when GATEWAY_SEMANTIC_CACHE_EMBEDDINGS is a config")] = "text-embedding-3-small"
    semantic_cache_max_entries: Annotated[int, setting(
        "semantic entries kept (the newest) and followed by each worker's index", ge=1)] = 100_000
    # usage and rate limit policies
    policy_output_tokens: Annotated[int, setting(
        "output tokens a token or cost limit reserves for a request that sets no max_tokens", ge=0)] = 1024
    policy_reservation_ttl_ms: Annotated[int, setting(
        "a token or cost reservation not settled by then (a worker died) is released", ge=1)] = 900_000


class SettingInfo(msgspec.Struct, frozen=True):
    """One setting as the environment and the command line see it (derived from its ``Settings`` field)."""

    name: str
    env: str
    aliases: tuple[str, ...]
    help: str
    secret: bool
    #: the value's kind: bool, int, float, str or tuple (a comma-separated list)
    kind: type
    default: Any
    #: the default as the docs describe it, when it is computed at start (``setting(shown=...)``)
    shown: str | None = None

    @property
    def default_text(self) -> str:
        """The default as ``gateway serve --help`` and the docs show it: ``unset``, ``empty``, ``true``, ``60``."""
        default = self.default
        if self.shown:
            return self.shown
        if isinstance(default, bool):
            return "true" if default else "false"
        if isinstance(default, tuple):
            return ",".join(default) or "empty"
        if default is None:
            return "unset"
        if isinstance(default, float) and default.is_integer():
            return str(int(default))
        return str(default)

    @property
    def flag(self) -> str:
        """``--max-body-bytes`` for ``max_body_bytes``."""
        return "--" + self.name.replace("_", "-")

    def from_text(self, text: str) -> Any:
        """A variable's (or flag's) text as msgspec's lax conversion wants it."""
        if self.kind is bool:
            return env_bool(text)
        if self.kind is tuple:
            return split_names(text)
        return text


def _info(field: msgspec.structs.FieldInfo) -> SettingInfo:
    hint = field.type
    meta = next((m for m in typing.get_args(hint)[1:] if isinstance(m, msgspec.Meta)), None)
    if meta is None or not meta.description:
        raise TypeError(f"Settings.{field.name} needs setting(...) metadata: its help text")
    extra = meta.extra or {}
    base = typing.get_args(hint)[0]
    if isinstance(base, types.UnionType):  # ``int | None``: the kind is the type that is not None
        base = next(k for k in typing.get_args(base) if k is not type(None))
    kind = typing.get_origin(base) or base
    if kind is Literal:  # a choice among texts
        kind = str
    default = field.default_factory() if field.default is msgspec.NODEFAULT else field.default
    return SettingInfo(field.name, extra.get("env", f"GATEWAY_{field.name.upper()}"), tuple(extra.get("aliases", ())),
                       meta.description, bool(extra.get("secret")), kind, default, extra.get("shown"))


#: every setting, in definition order
FIELDS: tuple[SettingInfo, ...] = tuple(_info(f) for f in msgspec.structs.fields(Settings))
_BY_NAME = {info.name: info for info in FIELDS}
#: field -> environment variable
ENV: dict[str, str] = {info.name: info.env for info in FIELDS}
#: the settings that are never flags, only variables
SECRETS: frozenset[str] = frozenset(info.name for info in FIELDS if info.secret)


#: what GATEWAY_PUBLIC_URL may be: http(s), a host, an optional path prefix, no query or fragment
_PUBLIC_URL = re.compile(r"https?://[^/?#\s]+(/[^?#\s]*)?")


def load(environ: Mapping[str, str] | None = None, flags: Mapping[str, str | bool] | None = None) -> Settings:
    """The settings from the environment (``os.environ`` by default), with ``flags`` (field -> the flag's text, or a
    bool for on/off flags) taking precedence. A bad value raises ValueError naming the variable or flag."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for info in FIELDS:
        for var in (info.env, *info.aliases):
            text = environ.get(var)
            if text:
                values[info.name] = info.from_text(text)
                source[info.name] = var
                break
    for name, value in (flags or {}).items():
        info = _BY_NAME[name]
        values[name] = info.from_text(value) if isinstance(value, str) else value
        source[name] = info.flag
    try:
        settings = msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(_explain(exc, values, source)) from None
    if settings.redis_url:
        try:
            check_redis_url(settings.redis_url)
        except ValueError as exc:  # the message never repeats the URL: it may hold a password
            raise ValueError(f"{source.get('redis_url', ENV['redis_url'])}: {exc}") from None
    if settings.public_url is not None and not _PUBLIC_URL.fullmatch(settings.public_url):
        raise ValueError(f"{source.get('public_url', ENV['public_url'])}: must be an http(s) URL with a host and no "
                         f"query or fragment (e.g. https://gateway.example.com), got {settings.public_url!r}")
    if settings.log_store_url:
        try:
            check_log_store_url(settings.log_store_url)
        except ValueError as exc:  # never repeats the URL: it holds a password
            raise ValueError(f"{source.get('log_store_url', ENV['log_store_url'])}: {exc}") from None
    return settings


def _explain(exc: msgspec.ValidationError, values: Mapping[str, Any], source: Mapping[str, str]) -> str:
    """``GATEWAY_WORKERS: must be an integer >= 1, got '0'`` from msgspec's ``Expected `int` >= 1 - at `$.workers```
    (read by ``gateway.http.fields``, in its words; a type error says what was given rather than its type)."""
    fault = read_fault(exc)
    if fault.path not in source:
        return f"{fault.path}: {problem_words(fault)}"
    detail = f"must be {fault.want}" if fault.kind == "type" else problem_words(fault)
    given = repr(values[fault.path])
    return f"{source[fault.path]}: {detail}" + ("" if given in detail else f", got {given}")


def hand_to_workers(settings: Settings) -> None:
    """Leave ``settings`` for the server's worker processes, which inherit this process's environment."""
    os.environ[HANDOFF_ENV] = msgspec.json.encode(settings).decode()


def for_worker() -> Settings:
    """A worker's settings: those ``gateway serve`` handed over, else (started some other way) the environment's."""
    text = os.environ.get(HANDOFF_ENV)
    if text:
        return msgspec.json.decode(text, type=Settings)
    return load()


class _KernelSwitch(msgspec.Struct):
    """The one field of the handed-over settings read on its own (the others are ignored)."""

    no_extensions: bool = False


def no_extensions_at_import() -> bool:
    """The ``no_extensions`` setting as modules see it while they are imported, before a worker has its settings
    (``gateway._speedups.NO_EXTENSIONS``: the compiled kernels are chosen once, at import). From the same sources
    as ``for_worker``: what ``gateway serve`` handed over (so ``--no-extensions`` counts), else the environment.
    Read alone, so a bad value of another setting is reported by ``load``, not by an import."""
    text = os.environ.get(HANDOFF_ENV)
    if text:
        return msgspec.json.decode(text, type=_KernelSwitch).no_extensions
    info = _BY_NAME["no_extensions"]
    first_set = next((text for var in (info.env, *info.aliases) if (text := os.environ.get(var))), None)
    return env_bool(first_set)  # as ``load`` reads it: the first variable set wins


#: the file-creation mask of a gateway process: everything it creates (the data directory and what is in it: the
#: SQLite files with their -wal and -shm files, uploads, spools, metrics, log files) is its owner's only, files 0600
#: and folders 0700
PRIVATE_UMASK = 0o077


def keep_files_private() -> None:
    """Create every file and folder from now on owner-only (``PRIVATE_UMASK``): the data directory holds request
    logs, uploaded files and sealed secrets. Called first by every command and worker that writes there."""
    os.umask(PRIVATE_UMASK)


def data_path(settings: Settings, *parts: str) -> Path:
    """A path in the data directory, which is created (owner-only) when missing."""
    path = Path(settings.data_dir).expanduser()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path.joinpath(*parts)


def _markdown_default(info: SettingInfo) -> str:
    """A default for the docs' table: words as words, values as code, sizes and long durations also in units."""
    text = info.default_text
    if info.shown or info.default is None or isinstance(info.default, bool) or info.default == ():
        return text
    value = info.default
    if info.name.endswith("_bytes") and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"`{text}` ({value >> 20} MiB)"
    if info.name.endswith("_ms") and value >= 60_000 and value % 60_000 == 0:
        return f"`{text}` ({value // 60_000} min)"
    return f"`{text}`"


def markdown_table() -> str:
    """The settings table of docs/operations.md: one row per setting, in definition order, from ``FIELDS``."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for info in FIELDS:
        names = f"`{info.env}`" + "".join(f" (or `{alias}`)" for alias in info.aliases)
        meaning = info.help + (" (environment only: a secret is never a flag)" if info.secret else "")
        meaning = meaning.replace("|", "\\|").replace("<", "\\<")  # a pipe ends a cell, < starts an HTML tag
        rows.append(f"| {names} | {_markdown_default(info)} | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # ``python -m gateway.settings --markdown``: the table for docs/operations.md
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m gateway.settings --markdown")
    sys.stdout.write(markdown_table())
