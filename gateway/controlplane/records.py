"""Typed control-plane records over the state store: one ``Repository`` per kind, every read scoped to a workspace.

A record is a msgspec Struct deriving from ``Entity`` (id, workspace_id, organisation_id, created_at,
last_updated_at as ISO 8601 UTC). It is stored as its JSON document under ``(kind, id)`` with the owning workspace,
so a list is one ``record_list`` and a workspace never sees another's records: a lookup by id in the wrong workspace
is the same 404 as a missing id. Ids are ``<prefix><uuid4>``; policies use a bare UUID (empty prefix).

Records whose id the user chooses (provider slugs) are ``scoped``: unique within their workspace only, so they are
stored under ``<workspace>/<id>`` and a second workspace may use the same name.

Concurrent changes: a create stores its record only while the id is free (``StateStore.record_create``, one atomic
step), so two creates of one slug at once give one record and one 409. Every change of a stored record is a read, a
change and a write, and two writers (workers, instances, two admins at once) may read the same record. ``update``
runs the three as "read, apply the change, write only if the stored document is still the one read"
(``StateStore.record_put_if``, compared byte for byte), reading again and re-applying the change when another write
came first; after ``UPDATE_ATTEMPTS`` lost races it answers 409. ``replace``, ``delete`` and ``rewrite`` take the
record as read (``expected``) for the same check; a ``rewrite`` (a change of form) that loses is dropped, since the
newer write already holds the content.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Awaitable, Callable, Generic, TypeVar

import msgspec

from gateway.http.errors import Conflict, InvalidRequest, NotFound, ServiceUnavailable
from gateway.state.base import StateStore, StateStoreError

DEFAULT_ORGANISATION = "default"
DEFAULT_WORKSPACE = "default"
#: what a workspace id may hold, checked where a workspace is first named (a key's creation): it goes into storage
#: keys beside record ids (``<workspace>/<id>``, ``<workspace>:<id>``), so none of the separators they use
WORKSPACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class Entity(msgspec.Struct, kw_only=True):
    """Fields every control-plane record carries."""

    id: str = ""
    workspace_id: str = DEFAULT_WORKSPACE
    organisation_id: str = DEFAULT_ORGANISATION
    created_at: str = ""
    last_updated_at: str = ""


E = TypeVar("E", bound=Entity)

_encode = msgspec.json.encode

#: how many times ``Repository.update`` reads, changes and tries to write a record before answering 409: each lost
#: race means another write landed, so this many concurrent writers of one record all get through
UPDATE_ATTEMPTS = 5


class RecordChanged(Exception):
    """A conditional write was not made: the record changed or was deleted since it was read (read it again and
    retry; ``Repository.update`` does)."""


def check_workspace_id(workspace: str, param: str = "workspace_id") -> str:
    """``workspace`` when it is a valid workspace id (1..64 letters, digits, ``.``, ``_`` or ``-``, starting with a
    letter or digit); else a 400 naming ``param``."""
    if not WORKSPACE_ID.fullmatch(workspace):
        raise InvalidRequest(f"{param} must be 1..64 letters, digits, '.', '_' or '-' (starting with a letter or "
                             f"digit), got {workspace!r}", param=param)
    return workspace


def applied(current: dict, changes: dict) -> dict:
    """``current`` with an update's ``changes`` applied as every ``PUT`` of the control plane applies them: a key given
    a value takes it, a key sent as null is removed, the others stay; the keys left with a value."""
    merged = dict(current)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return {k: v for k, v in merged.items() if v is not None}


def now_iso() -> str:
    """The current time as ISO 8601 UTC with milliseconds (``2026-11-23T16:54:16.123Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def store_unavailable(exc: StateStoreError) -> ServiceUnavailable:
    """The 503 a call that needs a record answers while the state store cannot be reached (in words, without the
    gateway's internal error names; ``gateway_state_store_errors_total`` counts the failures)."""
    return ServiceUnavailable("the state store is unavailable; try again shortly")


class Repository(Generic[E]):
    """Create, read, list, replace and delete records of one kind; ``what`` names them in 404 messages."""

    def __init__(self, store: StateStore, kind: str, type_: type[E], id_prefix: str, what: str,
                 id_param: str = "id", scoped: bool = False) -> None:
        self.store = store
        self.kind = kind
        self.type = type_
        self.id_prefix = id_prefix
        self.what = what
        self.id_param = id_param
        self.scoped = scoped
        self._decoder = msgspec.json.Decoder(type_)

    def new_id(self) -> str:
        return f"{self.id_prefix}{uuid.uuid4()}"

    def storage_id(self, workspace: str, id: str) -> str:
        """Where the record ``id`` of ``workspace`` is stored (``<workspace>/<id>`` for scoped kinds)."""
        return f"{workspace}/{id}" if self.scoped else id

    def _decode(self, doc: bytes) -> E:
        return self._decoder.decode(doc)

    async def create(self, record: E) -> E:
        """Store a new record: its id (unless set), created_at and last_updated_at are filled in. An id already
        stored (a scoped record's within its workspace) is a 409 and nothing is written: the check and the write
        are one step (``StateStore.record_create``), so of two creates of one id at once exactly one is stored."""
        stamp = now_iso()
        record = msgspec.structs.replace(
            record, id=record.id or self.new_id(), created_at=record.created_at or stamp, last_updated_at=stamp
        )
        try:
            created = await self.store.record_create(self.kind, self.storage_id(record.workspace_id, record.id),
                                                     record.workspace_id, _encode(record))
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        if not created:
            where = " in this workspace" if self.scoped else ""
            raise Conflict(f"{self.what} '{record.id}' already exists{where}", param=self.id_param)
        return record

    async def replace(self, record: E, expected: E | None = None) -> E:
        """Store a changed record (same id and workspace); last_updated_at is bumped. With ``expected`` (the record
        as read) only while the stored record is still that one, else ``RecordChanged`` and nothing is written."""
        record = msgspec.structs.replace(record, last_updated_at=now_iso())
        if expected is None:
            await self._put(record)
        elif not await self._put_if(record, await self._doc_of(expected)):
            raise RecordChanged(record.id)
        return record

    async def rewrite(self, record: E, expected: E | None = None) -> bool:
        """Store a record again as it is (a change of form, not of content: ``last_updated_at`` stays). With
        ``expected`` (the record as read) only while the stored record is still that one: a rewrite that lost the
        race is dropped (the newer write wins) and answers False."""
        if expected is None:
            await self._put(record)
            return True
        try:
            return await self._put_if(record, await self._doc_of(expected))
        except RecordChanged:
            return False

    async def update(self, workspace: str, id: str, change: Callable[[E], Awaitable[E | None]],
                     attempts: int = UPDATE_ATTEMPTS) -> E:
        """Read the record ``id`` of ``workspace`` (404 as ``get``), ``change`` it and store the result
        (``last_updated_at`` bumped) only if the record was not written meanwhile; else read it again and apply
        ``change`` to what is stored now. ``change`` may run more than once (what it reports must come from its
        last run) and answers None to leave the record as it is. After ``attempts`` lost races, a 409."""
        storage_id = self.storage_id(workspace, id)
        for _ in range(attempts):
            found = await self._read(storage_id)
            if found is None or found[0].workspace_id != workspace:
                raise NotFound(f"no {self.what} with id '{id}'", param=self.id_param)
            current, doc = found
            record = await change(current)
            if record is None:
                return current
            record = msgspec.structs.replace(record, last_updated_at=now_iso())
            if await self._put_if(record, doc):
                return record
        raise Conflict(f"the {self.what} '{id}' changed while it was being updated; retry", param=self.id_param)

    async def _doc_of(self, expected: E) -> bytes:
        """The stored document of the record ``expected`` is a read of (compared as records, so a document an
        older release encoded otherwise still matches); ``RecordChanged`` when the stored record is another."""
        found = await self._read(self.storage_id(expected.workspace_id, expected.id))
        if found is None or found[0] != expected:
            raise RecordChanged(expected.id)
        return found[1]

    async def _put_if(self, record: E, expected: bytes) -> bool:
        try:
            return await self.store.record_put_if(self.kind, self.storage_id(record.workspace_id, record.id),
                                                  record.workspace_id, _encode(record), expected)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def _put(self, record: E) -> None:
        try:
            await self.store.record_put(self.kind, self.storage_id(record.workspace_id, record.id),
                                        record.workspace_id, _encode(record))
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def _read(self, storage_id: str) -> tuple[E, bytes] | None:
        """The stored record and its document as stored, or None."""
        try:
            found = await self.store.record_get(self.kind, storage_id)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        return None if found is None else (self._decode(found.doc), found.doc)

    async def _fetch(self, storage_id: str) -> E | None:
        found = await self._read(storage_id)
        return None if found is None else found[0]

    async def find(self, id: str) -> E | None:
        """The record with this id in any workspace, or None (for lookups that are not a caller's request; not
        for scoped kinds, whose ids are unique only within a workspace)."""
        return await self._fetch(id)

    async def lookup(self, workspace: str, id: str) -> E | None:
        """The record ``id`` of ``workspace``, or None when it is missing or belongs elsewhere."""
        record = await self._fetch(self.storage_id(workspace, id))
        return None if record is None or record.workspace_id != workspace else record

    async def get(self, workspace: str, id: str) -> E:
        """The record ``id`` of ``workspace``; 404 naming the id when it is missing or belongs elsewhere."""
        record = await self.lookup(workspace, id)
        if record is None:
            raise NotFound(f"no {self.what} with id '{id}'", param=self.id_param)
        return record

    async def list(self, workspace: str | None) -> list[E]:
        """Every record of ``workspace`` (all workspaces with None), oldest first."""
        try:
            found = await self.store.record_list(self.kind, workspace)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        records = [self._decode(r.doc) for r in found]
        records.sort(key=lambda r: (r.created_at, r.id))
        return records

    async def delete(self, workspace: str, id: str, expected: E | None = None) -> E:
        """Delete the record ``id`` of ``workspace`` and return it; 404 as ``get``. With ``expected`` (the record
        as read) only while the stored record is still that one, else ``RecordChanged`` and nothing is deleted."""
        if expected is not None:
            doc = await self._doc_of(expected)
            try:
                deleted = await self.store.record_delete_if(self.kind, self.storage_id(workspace, id), doc)
            except StateStoreError as exc:
                raise store_unavailable(exc) from None
            if not deleted:
                raise RecordChanged(id)
            return expected
        record = await self.get(workspace, id)
        try:
            await self.store.record_delete(self.kind, self.storage_id(workspace, id))
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        return record
