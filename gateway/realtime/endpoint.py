"""``GET /v1/realtime?model=...`` upgraded to a WebSocket: the Realtime API relayed to the provider; and, with the
same machinery, ``GET /v1/responses`` upgraded: the Responses API's WebSocket mode forwarded as it is
(``dialect.py`` names what differs; docs/websockets.md).

Per upgrade, in order, each refusal an HTTP answer with the gateway's JSON error before the accept
(``gateway/http/websocket.py``), and each one recorded:

1. the gateway key (the one authentication function, scope ``inference``): ``x-gateway-api-key``, ``Authorization:
   Bearer <gateway key>``, or, from a browser, the subprotocol ``openai-insecure-api-key.<gateway key>``; or a client
   secret in that subprotocol (``gateway/realtime/secrets.py``), which stands for its minting key and its provider
   slug or saved config, whatever else the upgrade carries;
2. the provider and its credential from the request's config exactly as chat resolves it (``x-gateway-config``,
   ``x-gateway-provider: @slug``, or ``x-gateway-provider`` with the provider key as ``Authorization`` beside
   ``x-gateway-api-key``). A browser, which cannot set headers, names a provider slug or a saved config in the query
   (``x-gateway-provider=@slug``, ``x-gateway-config=<saved config id>``): names only, never a key or a JSON config.
   A config with several targets sends the session to its first one (no fallback once a session is open);
3. the target's URL and headers (``gateway/realtime/target.py``: vendorA and cloudB; another provider is a 400 for
   the Realtime API, and for the Responses mode a translated target, refused with a 400 when the Responses door
   cannot serve the provider: no chat API);
4. the workspace's policies (``admit_as`` with the provider and model: a rate limit counts the session as one
   request; it reserves one token's worth, so a spent token budget refuses it; each response's usage is then
   settled to the token and cost counters as it ends, ``budget.py``);
5. the provider's socket (``gateway/realtime/connect.py``), then the client's accept (answering ``realtime`` when
   the client offered it to the Realtime route), then the relay (``gateway/realtime/relay.py``) until either side
   ends; the record (``gateway/realtime/record.py``) goes to the recorder when it does. A translated session opens
   no provider socket: after the accept, ``gateway/realtime/translate.py`` runs each turn through the gateway's own
   Responses door (a request of its own: its record, its policies), and the session's hold settles no tokens.

``LiveSessions`` knows the worker's open sessions: when the worker is asked to stop (its signal, or the runtime
closing) every session is closed with 1001 and its record written, within the shutdown grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import parse_qs

from gateway.config.resolve import ConfigResolver
from gateway.controlplane.auth import authenticate
from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.http.context import RequestContext, build_context
from gateway.http.errors import Forbidden, GatewayError, InvalidRequest, ServiceUnavailable, internal_error
from gateway.http.shutdown import StopNotice
from gateway.http.types import Receive, Scope, Send
from gateway.http.websocket import ClientSocket
from gateway.observability.metrics import REALTIME_BYTES, REALTIME_MESSAGES, REALTIME_SESSIONS, Metrics
from gateway.policies.gate import BYTES_PER_TOKEN, PolicyGate
from gateway.realtime.connect import CLOSE_TIMEOUT_S, ProviderSockets
from gateway.realtime.dialect import REALTIME, Dialect, header
from gateway.realtime.record import SessionLog
from gateway.realtime.relay import Ending, Relay
from gateway.realtime.secrets import PREFIX as SECRET_PREFIX
from gateway.realtime.secrets import ClientSecrets, Grant
from gateway.realtime.target import RealtimeTarget
from gateway.realtime.translate import TranslatedSession, Translator, mark_record, turn_headers
from gateway.routing.plan import Node, Planner
from gateway.schema.config import Config
from gateway.settings import Settings
from gateway.upstream.client import UpstreamClient
from gateway.waiting import within

SCOPE = "inference"
INSECURE_KEY_PREFIX = "openai-insecure-api-key."
#: the header that carries the browser's subprotocols (and so its gateway key): masked in every log
SUBPROTOCOL_HEADER = "sec-websocket-protocol"
#: query parameters a browser may use to name its provider (names only: a key or JSON config never comes this way)
_QUERY_NAMES = ("x-gateway-provider", "x-gateway-config")
_RECORD_ROUNDS = 4
#: how a session the server dropped mid-relay (its handler cancelled) is recorded
LEFT_EARLY = Ending(1006, "", "client", "the client left before its session was accepted")
DROPPED = Ending(1006, "session dropped by the server", "gateway", "the session's handler was cancelled")


class LiveSessions:
    """The worker's open sessions: ``stopping`` is set when the worker stops, which ends each with 1001."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.open: set[asyncio.Future[Any]] = set()
        self._notice = StopNotice()
        self._stopping: asyncio.Event | None = None

    @property
    def stopping(self) -> asyncio.Event:
        """Set by the worker's stop signal (the event ``StopNotice`` sets from its handler: no hop between) or by
        ``close``; made, and the signal handlers chained, on first use."""
        if self._stopping is None:
            self._stopping = self._notice.event
        return self._stopping

    def enter(self) -> asyncio.Future[Any]:
        """A token for one session (done when it ends)."""
        token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.open.add(token)
        return token

    def leave(self, token: asyncio.Future[Any]) -> None:
        self.open.discard(token)
        if not token.done():
            token.set_result(None)

    async def close(self) -> None:
        """End every session (1001) and wait, at most the grace period, for their records."""
        if self._stopping is None:  # no session ever opened
            return
        self._stopping.set()
        if self.open:
            await asyncio.wait(set(self.open), timeout=self.grace_s)


class RealtimeEndpoint:
    """A WebSocket route of one worker: ``/v1/realtime``, or ``/v1/responses`` with the ``RESPONSES`` dialect."""

    def __init__(self, keys: KeyStore, records: RecordCache, resolver: ConfigResolver, planner: Planner,
                 policies: PolicyGate, client: UpstreamClient, recorder: Any, settings: Settings,
                 sessions: LiveSessions, secrets: ClientSecrets, metrics: Metrics, dialect: Dialect = REALTIME,
                 translator: Translator | None = None) -> None:
        self.dialect = dialect
        #: serves the Responses mode's turns through the gateway's own door for other providers (None: refused)
        self.translator = translator
        #: the realtime metrics' ``api`` label: ``realtime``, or ``responses`` for the Responses WebSocket mode
        self.api_label = "realtime" if dialect.endpoint == REALTIME.endpoint else "responses"
        self.keys = keys
        self.records = records
        self.resolver = resolver
        self.planner = planner
        self.policies = policies
        self.client = client
        self.recorder = recorder
        self.sessions = sessions
        self.secrets = secrets
        self.metrics = metrics
        self.provider_sockets = ProviderSockets(client)
        self.max_bytes = settings.realtime_max_message_bytes
        self.idle_s = settings.realtime_idle_timeout_ms / 1000
        self.connect_s = settings.upstream_connect_timeout_ms / 1000

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        socket = ClientSocket(scope, receive, send)
        if not await socket.wait_connect():
            return
        dialect = self.dialect
        log = SessionLog(time.perf_counter(), dialect.endpoint, dialect.usage_ends)
        try:
            target, key = await self._admit(scope, socket, log)
            log.record.upstream_started = time.perf_counter()
            upstream = None if target.translated else await self.provider_sockets.open(target, self.max_bytes,
                                                                                         self.connect_s)
            log.connected()
        except Exception as exc:  # noqa: BLE001 - every refusal is the gateway's JSON error
            error = exc if isinstance(exc, GatewayError) else internal_error(exc)
            await socket.refuse(error)
            log.refused(error).done(self.recorder)
            return
        token = self.sessions.enter()
        ending = DROPPED
        translated: TranslatedSession | None = None
        try:
            offered = dialect.subprotocol
            chosen = offered if offered is not None and offered in socket.subprotocols else None
            trace = [(b"x-gateway-trace-id", log.record.trace_id.encode("latin-1"))]
            try:
                await socket.accept(chosen, trace)
            except ConnectionError:
                ending = LEFT_EARLY
                return
            log.opened()
            self.metrics.count(REALTIME_SESSIONS, ("opened", self.api_label, target.provider))
            if upstream is None:  # translated: each turn runs through the gateway's own Responses door
                translated = self._translated(socket, key, log)
                ending = await translated.run()
                return
            budget = log.watch(target.provider, target.model, dialect.error_event)
            relay = Relay(socket, upstream, self.max_bytes, self.idle_s, self.sessions.stopping, log.usage,
                          log.traffic, budget)
            ending = await relay.run()
        finally:
            if upstream is not None and not upstream.closed:  # cancelled mid-relay: no socket left behind
                with contextlib.suppress(Exception):
                    await within(upstream.close(code=1001), CLOSE_TIMEOUT_S)
            log.ended(ending)
            if translated is not None:
                mark_record(log.record, translated)
            log.done(self.recorder)
            if socket.accepted:
                _count(self.metrics, self.api_label, target.provider, log)
            self.sessions.leave(token)

    async def close(self) -> None:
        """With the worker: end the open sessions (1001), then close the providers' sockets' client session."""
        await self.sessions.close()
        await self.provider_sockets.close()

    def _translated(self, socket: ClientSocket, key: KeyRecord, log: SessionLog) -> TranslatedSession:
        """The session of a provider whose turns the gateway translates (``translate.py``)."""
        assert self.translator is not None and log.ctx is not None  # a translated target is refused without them
        record = log.record
        return TranslatedSession(socket, self.translator.dispatcher, key,
                                 turn_headers(log.ctx.raw_headers, record.trace_id, record.span_id), self.max_bytes,
                                 self.idle_s, self.sessions.stopping, log.usage, log.traffic)

    async def _admit(self, scope: Scope, socket: ClientSocket, log: SessionLog) -> tuple[RealtimeTarget, KeyRecord]:
        """The caller's key, the config's first target as the dialect's target, and the policies' admission."""
        query = _query(scope)
        key_in_subprotocol = _subprotocol_key(socket.subprotocols)
        headers = list(scope.get("headers") or ())
        grant: Grant | None = None
        if key_in_subprotocol is not None and key_in_subprotocol.startswith(SECRET_PREFIX):
            if not self.dialect.takes_client_secrets:  # refused before redeeming: the secret stays usable
                raise Forbidden(f"a client secret opens Realtime sessions (/v1/realtime) only, not the "
                                f"{self.dialect.api}; authenticate with a gateway key", param=SUBPROTOCOL_HEADER)
            grant = await self.secrets.redeem(key_in_subprotocol)
            headers = _granted_headers(headers, grant)
            key_in_subprotocol = grant.key
        elif key_in_subprotocol is not None:
            headers.extend(_named_in_query(query, headers))
        ctx = build_context(headers)
        ctx.sensitive_headers = ctx.sensitive_headers | {SUBPROTOCOL_HEADER}
        log.know(ctx)
        if key_in_subprotocol is not None and not ctx.api_key and not ctx.bearer:
            ctx.api_key = key_in_subprotocol
        key = await authenticate(self.keys, ctx, SCOPE)
        log.record.workspace = key.workspace
        config = await self._config(ctx)
        leaf = first_target(self.planner.plan(config))
        model = query.get("model") or query.get("deployment")
        if grant is not None and grant.model:
            if model and model != grant.model:
                raise Forbidden(f"this client secret opens sessions of model '{grant.model}' only", param="model")
            model = grant.model
        target = self.dialect.target(leaf, model, query, headers)
        if target.translated:
            if self.translator is None:
                raise InvalidRequest(f"provider '{target.provider}': the {self.dialect.api} is not translated here",
                                     param="provider")
            self.translator.check(target.provider)
        record = log.record
        record.provider, record.model = target.provider, target.model
        policies = self.policies
        if policies.may_apply(ctx.workspace):
            log.policies = policies
            # a body of one token's bytes: the reservation (settled to the session's usage when it ends) is then
            # at least 1 token, which a spent token budget refuses (an amount of 0 fits even a spent one)
            log.hold = await policies.admit_as(ctx, None, BYTES_PER_TOKEN, target.provider, target.model)
        return target, key

    async def _config(self, ctx: RequestContext) -> Config:
        return await session_config(self.resolver, self.records, ctx)


async def session_config(resolver: ConfigResolver, records: RecordCache, ctx: RequestContext) -> Config:
    """The request's config, loading the slugs and saved configs it names."""
    for _ in range(_RECORD_ROUNDS):
        try:
            return resolver.resolve(ctx, records)
        except RecordsNeeded as needed:
            await records.fetch(needed)
    raise ServiceUnavailable("control-plane records are changing too fast to be read; try again shortly")


def _count(metrics: Metrics, api: str, provider: str, log: SessionLog) -> None:
    """An accepted session's end, messages and bytes in the metrics."""
    traffic = log.traffic
    metrics.count(REALTIME_SESSIONS, ("ended", api, provider))
    metrics.count(REALTIME_MESSAGES, ("in", api, provider), traffic.messages_in)
    metrics.count(REALTIME_MESSAGES, ("out", api, provider), traffic.messages_out)
    metrics.count(REALTIME_BYTES, ("in", api, provider), traffic.bytes_in)
    metrics.count(REALTIME_BYTES, ("out", api, provider), traffic.bytes_out)


#: the headers a client-secret session keeps of its own (every other gateway header comes from the grant)
_KEPT_WITH_A_SECRET = frozenset({"xgatewaytraceid", "xgatewaymetadata", "xgatewayspanid", "xgatewayparentspanid",
                                 "xgatewayspanname"})


def _granted_headers(headers: list[tuple[bytes, bytes]], grant: Grant) -> list[tuple[bytes, bytes]]:
    """The upgrade's headers with the gateway key and the provider as the client secret grants them: the client's
    own credential and provider headers (in any spelling) dropped, so a secret opens only what it was minted for."""
    kept = []
    for name, value in headers:
        plain = name.decode("latin-1").lower().replace("-", "").replace("_", "")
        if plain == "authorization" or (plain.startswith("xgateway") and plain not in _KEPT_WITH_A_SECRET):
            continue
        kept.append((name, value))
    kept.append((b"x-gateway-api-key", grant.key.encode()))
    if grant.provider:
        kept.append((b"x-gateway-provider", grant.provider.encode()))
    if grant.config:
        kept.append((b"x-gateway-config", grant.config.encode()))
    return kept


def first_target(node: Node) -> Config:
    """The config of the target tried first: the first leaf, depth first, as the config lists them."""
    while node.children:
        node = node.children[0]
    if not node.config.provider:
        raise InvalidRequest(f"{node.path} has no provider", param=f"{node.path}.provider")
    return node.config


def _query(scope: Scope) -> dict[str, str]:
    raw = scope.get("query_string") or b""
    return {k: v[-1] for k, v in parse_qs(raw.decode("latin-1"), keep_blank_values=True).items()}


def _subprotocol_key(offered: list[str]) -> str | None:
    for name in offered:
        if name.startswith(INSECURE_KEY_PREFIX) and len(name) > len(INSECURE_KEY_PREFIX):
            return name[len(INSECURE_KEY_PREFIX):]
    return None


def _named_in_query(query: dict[str, str], headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """A browser's provider slug or saved config id from the query, as the headers it cannot send (a header the
    request does carry wins); a key or a JSON config in the query is refused."""
    added: list[tuple[bytes, bytes]] = []
    for name in _QUERY_NAMES:
        value = query.get(name)
        if not value or header(headers, name.encode()) is not None:
            continue
        if name == "x-gateway-provider" and not value.startswith("@"):
            raise InvalidRequest("a browser names its provider by a slug: x-gateway-provider=@<slug> (the "
                                 "provider key stays in the gateway)", param=name)
        if name == "x-gateway-config" and value.lstrip().startswith("{"):
            raise InvalidRequest("a browser names a saved config by its id: x-gateway-config=<id> (a JSON config "
                                 "would carry a provider key in the page)", param=name)
        added.append((name.encode(), value.encode()))
    return added
