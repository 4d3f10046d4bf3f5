"""The per-worker read side of the control plane for the request path: provider slugs, saved configs and prompts,
the MCP servers the MCP data path reads (``mcp_target``, ``mcp_targets``) and the A2A agents the agent data path
reads (``agent_target``): coroutines, off the chat path.

Requests read records through dict lookups only. A lookup that misses raises ``RecordsNeeded`` naming what to
load; the caller awaits ``fetch`` (store reads, never on the event loop's time beyond the await; concurrent misses
of one record share one read) and asks again. Answers, "no such record" included, stay cached until
``invalidate``, which the records watcher calls when a record of one of ``RecordCache.KINDS`` changes anywhere (so
an update reaches every worker within a second; a write through this worker's store at once). Values derived from
records (expanded configs, slug configs completed by headers) live in ``derived`` and go with them.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Hashable

from gateway.bounded_cache import BoundedCache
from gateway.controlplane import agents, configs, mcp_servers, prompts, providers
from gateway.controlplane.records import Repository, store_unavailable
from gateway.controlplane.secrets import SecretBox, SecretError
from gateway.http.errors import RecordUnusable
from gateway.schema import header_values
from gateway.schema.agent_target import AgentTarget
from gateway.schema.config import Config
from gateway.schema.header_values import field_with_breaks
from gateway.schema.mcp_target import ServerTarget
from gateway.state.base import StateStore, StateStoreError

SLUG = "slug"
CONFIG = "config"
PROMPT = "prompt"
MCP_SERVER = "mcp_server"
#: a workspace's MCP servers, as one entry (its id is empty)
MCP_SERVERS = "mcp_servers"
AGENT = "agent"
#: how often ``_cached`` loads again when records change while it loads, before it answers its own read uncached
_LOAD_TRIES = 3
_MAX_ENTRIES = 10_000
_MAX_DERIVED = 4096


class RecordsNeeded(Exception):
    """A request needs records this worker has not loaded: ``wants`` is a list of (kind, workspace, id)."""

    def __init__(self, wants: list[tuple[str, str, str]]) -> None:
        super().__init__(wants)
        self.wants = wants


def unusable(record: configs.SavedConfig, exc: SecretError) -> RecordUnusable:
    """The 500 of a saved config whose secrets this gateway cannot open (sealed under another secret key)."""
    return RecordUnusable(f"saved config '{record.id}' cannot be used: {exc}", param="x-gateway-config")


class RecordCache:
    """Per-worker caches of slugs (as Configs), saved configs (as JSON text) and prompts (compiled)."""

    #: the record kinds these caches hold: a change of any other kind leaves them as they are
    KINDS: tuple[str, ...] = (providers.KIND, configs.KIND, prompts.KIND, prompts.VERSION_KIND, mcp_servers.KIND,
                             agents.KIND)

    def __init__(self, store: StateStore, box: Callable[[], SecretBox]) -> None:
        self.store = store
        self._open_box = box
        self._box: SecretBox | None = None
        self.slugs: Repository[providers.ProviderSlug] = Repository(
            store, providers.KIND, providers.ProviderSlug, "", "provider slug", "slug", scoped=True)
        self.configs: Repository[configs.SavedConfig] = Repository(
            store, configs.KIND, configs.SavedConfig, "pc-", "saved config")
        self.prompts: Repository[prompts.Prompt] = Repository(
            store, prompts.KIND, prompts.Prompt, "pp-", "prompt", "prompt_id")
        self.mcp_servers: Repository[mcp_servers.McpServer] = Repository(
            store, mcp_servers.KIND, mcp_servers.McpServer, "", "MCP server", "slug", scoped=True)
        self.agents: Repository[agents.Agent] = Repository(
            store, agents.KIND, agents.Agent, "", "agent", "slug", scoped=True)
        self._entries: BoundedCache[tuple[str, str, str], Any] = BoundedCache(_MAX_ENTRIES)
        self.derived: BoundedCache[Hashable, Any] = BoundedCache(_MAX_DERIVED)
        self._inflight: dict[tuple[str, str, str], asyncio.Future] = {}
        self.generation = 0

    @property
    def box(self) -> SecretBox:
        """The secret box (opened on first use: it may read or create the key file)."""
        if self._box is None:
            self._box = self._open_box()
        return self._box

    # -- the request path: dict lookups ----------------------------------------------------------------------

    def _get(self, kind: str, workspace: str, id: str) -> Any:
        key = (kind, workspace, id)
        try:
            value = self._entries[key]
        except KeyError:
            raise RecordsNeeded([key]) from None
        if isinstance(value, RecordUnusable):
            raise RecordUnusable(value.message, param=value.param)  # a fresh error: a raised one keeps its traceback
        return value

    def has(self, kind: str, workspace: str, id: str) -> bool:
        return (kind, workspace, id) in self._entries

    def slug(self, workspace: str, slug: str) -> Config | None:
        """The slug's Config (provider and credentials), None when the workspace has no such slug."""
        return self._get(SLUG, workspace, slug)

    def saved_config(self, workspace: str, id: str) -> bytes | None:
        """The saved config's JSON text, None when the workspace has no such config."""
        return self._get(CONFIG, workspace, id)

    def prompt(self, workspace: str, id: str) -> prompts.Template | None:
        """The prompt's compiled template, None when the workspace has no such prompt."""
        return self._get(PROMPT, workspace, id)

    async def mcp_target(self, workspace: str, slug: str) -> ServerTarget | None:
        """The MCP server ``slug`` of ``workspace`` as the data path sees it, None when there is none; a record
        whose headers this gateway cannot open is a 500 (``RecordUnusable``) naming it."""
        return await self._cached((MCP_SERVER, workspace, slug))

    async def mcp_targets(self, workspace: str) -> list[ServerTarget]:
        """Every MCP server of ``workspace`` the data path can use, oldest first (one whose headers this gateway
        cannot open is left out: ``mcp_target`` names its error)."""
        return list(await self._cached((MCP_SERVERS, workspace, "")))

    async def agent_target(self, workspace: str, slug: str) -> AgentTarget | None:
        """The agent ``slug`` of ``workspace`` as the data path sees it, None when there is none; a record whose
        headers this gateway cannot open is a 500 (``RecordUnusable``) naming it."""
        return await self._cached((AGENT, workspace, slug))

    async def _cached(self, key: tuple[str, str, str]) -> Any:
        for _ in range(_LOAD_TRIES):
            try:
                return self._get(*key)
            except RecordsNeeded as needed:
                await self.fetch(needed)
        try:
            value = await self._load(*key)  # records keep changing: this read's own answer, not kept
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        if isinstance(value, RecordUnusable):
            raise value
        return value

    def keep(self, key: Hashable, value: Any) -> None:
        """Store a derived value (bounded: the oldest go first)."""
        self.derived[key] = value

    # -- loading ---------------------------------------------------------------------------------------------

    async def fetch(self, needed: RecordsNeeded) -> None:
        """Load what ``needed`` names (a missing record is remembered as None); 503 when the store is down."""
        for key in needed.wants:
            if key in self._entries:
                continue
            waiting = self._inflight.get(key)
            if waiting is not None:
                await asyncio.shield(waiting)
                continue
            future = asyncio.get_running_loop().create_future()
            self._inflight[key] = future
            generation = self.generation
            try:
                value = await self._load(*key)
                if generation == self.generation:
                    self._entries[key] = value
                future.set_result(None)
            except BaseException as exc:
                future.set_result(None)
                if isinstance(exc, StateStoreError):
                    raise store_unavailable(exc) from None
                raise
            finally:
                self._inflight.pop(key, None)

    async def _load(self, kind: str, workspace: str, id: str) -> Any:
        if kind == SLUG:
            record = await self.slugs.lookup(workspace, id)
            if record is None:
                return None
            try:
                config = providers.slug_config(self.box, record)
            except SecretError as exc:
                return RecordUnusable(f"provider slug '@{id}' cannot be used: {exc}", param="provider")
            broken = field_with_breaks(config)
            if broken is None:
                return config
            # stored before such values were refused at the door: a clear answer instead of a failed send
            return RecordUnusable(f"provider slug '@{id}' cannot be used: its {broken} {header_values.MESSAGE}; "
                                  f"send {broken} again with PUT /v1/providers/{id}", param="provider")
        if kind == CONFIG:
            saved = await self.configs.lookup(workspace, id)
            if saved is None:
                return None
            saved = await configs.sealed_record(self.configs, self.box, saved)
            try:
                return configs.opened(self.box, saved)  # once per load: the text stays cached until records change
            except SecretError as exc:
                return unusable(saved, exc)
        if kind == MCP_SERVER:
            server = await self.mcp_servers.lookup(workspace, id)
            if server is None:
                return None
            try:
                return mcp_servers.target(self.box, server)
            except SecretError as exc:
                return RecordUnusable(f"MCP server '{id}' cannot be used: {exc}", param="slug")
        if kind == AGENT:
            agent = await self.agents.lookup(workspace, id)
            if agent is None:
                return None
            try:
                return agents.target(self.box, agent)
            except SecretError as exc:
                return RecordUnusable(f"agent '{id}' cannot be used: {exc}", param="slug")
        if kind == MCP_SERVERS:
            targets = []
            for server in await self.mcp_servers.list(workspace):
                try:
                    targets.append(mcp_servers.target(self.box, server))
                except SecretError:
                    continue
            return targets
        prompt = await self.prompts.lookup(workspace, id)
        return None if prompt is None else prompts.Template(prompt)

    def invalidate(self) -> None:
        """Forget every record and derived value (records changed somewhere)."""
        self.generation += 1
        self._entries = BoundedCache(_MAX_ENTRIES)
        self.derived = BoundedCache(_MAX_DERIVED)
