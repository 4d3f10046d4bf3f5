"""The per-worker services behind the files, batches, fine-tuning and stored-responses routes, and what those
routes share: the caller, query values and cursor pages (``job_routes`` builds the services and mounts the routes).

Callers authenticate as on every route (``gateway.controlplane.auth``: without ``x-gateway-api-key`` the bearer
token is the gateway key and is never sent to a provider). Any gateway key with the ``inference`` scope may use them
(admin or member); every gateway-stored object belongs to the key's workspace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Collection, Sequence, TypeVar
from urllib.parse import parse_qsl

from gateway.api.admin import Caller
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest
from gateway.http.types import Scope
from gateway.jobs.batch_deps import RunnerDeps
from gateway.jobs.batch_scheduler import BatchScheduler
from gateway.jobs.batch_store import BatchStore
from gateway.jobs.files import GatewayFiles
from gateway.jobs.filestore import open_file_store
from gateway.jobs.passthrough import Forwarder
from gateway.settings import Settings, data_path
from gateway.state.base import StateStore

if TYPE_CHECKING:
    from gateway.jobs.batch_dispatch import SendLine

T = TypeVar("T")
#: the authenticated caller of a route with an ``inference`` key: ``(scope, query names) -> Caller``
Authorize = Callable[[Scope, "Collection[str] | None"], Awaitable[Caller]]


def batch_parsers() -> dict[str, Callable[[bytes], Any]]:
    """Each batch endpoint's body parser (the one its route uses)."""
    from gateway.schema.chat import parse_chat
    from gateway.schema.completions import parse_completion
    from gateway.schema.embeddings import parse_embeddings

    return {"/v1/chat/completions": parse_chat, "/v1/completions": parse_completion,
            "/v1/embeddings": parse_embeddings}


class Jobs:
    """Files, batches and the forwarder of one worker; started and closed with the runtime."""

    def __init__(self, settings: Settings, store: StateStore, keys: KeyStore, box: Callable[[], SecretBox],
                 authorize: Authorize, forwarder: Forwarder, send: SendLine) -> None:
        self.settings = settings
        #: the state store (the Responses door's stored responses are read from it)
        self.store = store
        #: the secret box that seals and opens batch headers (opened on first use: it may read the key file)
        self.box = box
        self._authorize = authorize
        self.files = GatewayFiles(store, open_file_store(settings, store))
        self.batches = BatchStore(store, box)
        self.forwarder = forwarder
        self.scheduler = BatchScheduler(
            RunnerDeps(settings, self.batches, self.files, send, batch_parsers(), keys, box))
        spool = data_path(settings, "tmp")
        spool.mkdir(exist_ok=True)
        self.spool_dir = str(spool)

    async def start(self) -> None:
        await self.scheduler.start()

    async def close(self) -> None:
        await self.scheduler.close()

    async def caller(self, scope: Scope, query: Collection[str] | None = None) -> Caller:
        """The authenticated caller (its key needs the ``inference`` scope). ``query``: the query names a list route
        reads (see ``admin.known_query``)."""
        caller = await self._authorize(scope, query)
        caller.ctx.workspace = caller.workspace  # slugs and saved configs are those of the workspace acted in
        return caller


def query_pairs(scope: Scope) -> list[tuple[str, str]]:
    raw = scope.get("query_string") or b""
    return parse_qsl(raw.decode("latin-1"), keep_blank_values=True) if raw else []


def raw_query(scope: Scope) -> str:
    return (scope.get("query_string") or b"").decode("latin-1")


def cursor_page(items: Sequence[T], id_of: Callable[[T], str], after: str | None, limit: int,
                ) -> tuple[list[T], bool]:
    """The ``limit`` items after the one whose id is ``after`` (from the start without it), and has_more; an
    ``after`` that names no item is a 400."""
    start = 0
    if after:
        for i, item in enumerate(items):
            if id_of(item) == after:
                start = i + 1
                break
        else:
            raise InvalidRequest(f"after names no object of this list: {after!r}", param="after")
    page = list(items[start:start + limit])
    return page, start + limit < len(items)


def list_envelope(data: list, id_of: Callable[[Any], str], has_more: bool) -> dict:
    return {"object": "list", "data": data, "first_id": id_of(data[0]) if data else None,
            "last_id": id_of(data[-1]) if data else None, "has_more": has_more}
