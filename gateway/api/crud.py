"""The five admin routes of one kind of workspace record (create, list, get, update, delete), written once.

Authorisation (the admin role and ``<family>.read`` or ``<family>.write``), reading the body, choosing the workspace
(the body's ``workspace_id``, else the query's, else the key's), paging, telling the workers that records changed
and the answers' shapes are the same for saved configs, provider slugs and prompts; each kind's routes subclass
``RecordRoutes`` and say only what differs: how a body becomes a record, how an update applies, what a list may
filter on and how a record is shown. Kinds named by a slug (provider slugs, MCP servers, agents) subclass
``SlugRoutes``, which reads the slug of a create and of an update the same way for all of them.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Protocol, TypeVar

import msgspec

from gateway.api.admin import PAGED, Caller, authorize, int_query, page, read_json, send_list, send_record
from gateway.controlplane.keys import KeyStore
from gateway.controlplane.providers import normalise_slug
from gateway.controlplane.records import Entity, Repository
from gateway.http.errors import InvalidRequest
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.schema.common import BodyDecoder


class WorkspaceBody(Protocol):
    @property
    def workspace_id(self) -> str | None: ...


R = TypeVar("R", bound=Entity)
B = TypeVar("B", bound=WorkspaceBody)


class RecordRoutes(Generic[R, B]):
    """``POST path``, ``GET path``, ``GET path/{id}``, ``PUT path/{id}``, ``DELETE path/{id}`` over ``repo``."""

    #: the collection's path (``/v1/configs``), the id's path parameter and the ``object`` of a delete's answer
    path = ""
    id_param = "id"
    object = ""
    #: the query names a list reads
    list_query: tuple[str, ...] = PAGED

    def __init__(self, keys: KeyStore, repo: Repository[R], body: BodyDecoder[B]) -> None:
        """``keys`` authorise the callers (a write reaches this worker's caches through the store's change
        listeners, others' through their records watchers)."""
        self.keys = keys
        self.repo = repo
        self.body = body
        # the scopes the routes need (with the admin role): ``<family>.read`` to read, ``<family>.write`` to change,
        # where the family is the collection's last path segment (``providers``, ``configs``, ``prompts``)
        family = self.path.rsplit("/", 1)[-1]
        self.read_scope, self.write_scope = f"{family}.read", f"{family}.write"

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        one = f"{self.path}/{{{self.id_param}}}"
        return [
            ("POST", self.path, self.create),
            ("GET", self.path, self.list),
            ("GET", one, self.get),
            ("PUT", one, self.update),
            ("DELETE", one, self.delete),
        ]

    # -- what a kind says ----------------------------------------------------------------------------------------

    async def build(self, caller: Caller, workspace: str, body: B) -> R:
        """The new record a create body makes (validated; a fault is a 400)."""
        raise NotImplementedError

    async def updated(self, current: R, workspace: str, body: B) -> R:
        """The record an update body makes of ``current`` (validated; a fault is a 400). When another write of the
        record lands first it is called again on the record then stored (``Repository.update``)."""
        raise NotImplementedError

    async def shown(self, record: R) -> Any:
        """The record as answers show it."""
        return record

    def matches(self, query: dict[str, str]) -> Callable[[R], bool] | None:
        """Which records a list keeps (None: all), read from the list's query."""
        return None

    def record_id(self, scope: Scope) -> str:
        return str(scope["path_params"][self.id_param])

    async def created(self, record: R) -> None:
        """Called once a new record is stored."""

    async def stored(self, record: R) -> None:
        """Called once an update is stored."""

    async def deleted(self, record: R) -> None:
        """Called once a record is deleted."""

    # -- the routes ----------------------------------------------------------------------------------------------

    async def _caller_and_body(self, scope: Scope, receive: Receive) -> tuple[Caller, str, B]:
        caller = await authorize(self.keys, scope, self.write_scope)
        body = await read_json(scope, receive, self.body)
        return caller, caller.workspace_for(body.workspace_id or caller.query.get("workspace_id")), body

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller, workspace, body = await self._caller_and_body(scope, receive)
        record = await self.repo.create(await self.build(caller, workspace, body))
        await self.created(record)
        await send_record(send, await self.shown(record), 201)

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.read_scope, query=self.list_query)
        keep = self.matches(caller.query)
        records = await self.repo.list(caller.workspace)
        if keep is not None:
            records = [r for r in records if keep(r)]
        size = int_query(caller.query, "page_size", 0, 0)
        current = int_query(caller.query, "current_page", 0, 0)
        await send_list(send, [await self.shown(r) for r in page(records, size, current)], len(records))

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.read_scope)
        await send_record(send, await self.shown(await self.repo.get(caller.workspace, self.record_id(scope))))

    async def update(self, scope: Scope, receive: Receive, send: Send) -> None:
        _, workspace, body = await self._caller_and_body(scope, receive)
        record = await self.repo.update(workspace, self.record_id(scope),
                                        lambda current: self.updated(current, workspace, body))
        await self.stored(record)
        await send_record(send, await self.shown(record))

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await authorize(self.keys, scope, self.write_scope)
        record = await self.repo.delete(caller.workspace, self.record_id(scope))
        await self.deleted(record)
        await send_record(send, {"id": record.id, "object": self.object, "deleted": True})


def body_fields(body: Any) -> dict[str, Any]:
    """The fields a create or update body sets (as builtins), without its ``workspace_id``."""
    fields = msgspec.structs.asdict(body)
    fields.pop("workspace_id", None)
    return {k: msgspec.to_builtins(v) for k, v in fields.items() if v is not msgspec.UNSET}


class SlugRoutes(RecordRoutes[R, B]):
    """The routes of a kind whose records a slug names: a create must send ``slug`` and an update may send only the
    record's own; the body's and the path's slugs are normalised (``providers.normalise_slug``)."""

    id_param = "slug"
    #: what an update sending another slug is told to do instead (``create a new MCP server``)
    instead = "create a new record"

    def record_id(self, scope: Scope) -> str:
        return normalise_slug(scope["path_params"]["slug"])

    def created_fields(self, body: B) -> tuple[str, dict[str, Any]]:
        """A create body's slug (a 400 when it has none) and its other fields."""
        fields = body_fields(body)
        if not fields.get("slug"):
            raise InvalidRequest("slug is required", param="slug")
        return normalise_slug(fields.pop("slug")), fields

    def changed_fields(self, body: B, slug: str) -> dict[str, Any]:
        """An update body's fields, without a ``slug`` that names the record ``slug`` (any other is a 400)."""
        changes = body_fields(body)
        given = changes.pop("slug", None)
        if given is not None and normalise_slug(given) != slug:
            raise InvalidRequest(f"slug cannot be changed; {self.instead} instead", param="slug")
        return changes
