"""Repository's conditional writes: of two creates of one id at once one is stored and the other is a 409, an update
that another write overtakes is applied again to what is stored (so neither change is lost), a record that keeps
changing answers 409, and a rewrite that lost its race is dropped."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from gateway.controlplane.records import UPDATE_ATTEMPTS, Entity, RecordChanged, Repository
from gateway.http.errors import Conflict, NotFound
from gateway.state.base import Record
from gateway.state.memory import MemoryStateStore


class Thing(Entity, kw_only=True):
    tags: list[str] = []
    note: str = ""


@pytest.fixture
async def repo():
    store = MemoryStateStore()
    await store.start()
    yield Repository(store, "thing", Thing, "thing-", "thing")
    await store.close()


async def test_an_update_overtaken_by_another_write_is_applied_again_to_what_is_stored(repo):
    thing = await repo.create(Thing(workspace_id="ws"))
    runs: list[list[str]] = []

    async def tag_a(current: Thing) -> Thing:
        runs.append(current.tags)
        if len(runs) == 1:  # another writer lands between this read and this write
            await repo.update("ws", thing.id, tag_b)
        return msgspec.structs.replace(current, tags=[*current.tags, "a"])

    async def tag_b(current: Thing) -> Thing:
        return msgspec.structs.replace(current, tags=[*current.tags, "b"])

    updated = await repo.update("ws", thing.id, tag_a)
    assert runs == [[], ["b"]]
    assert updated.tags == ["b", "a"]
    assert (await repo.get("ws", thing.id)).tags == ["b", "a"]


async def test_an_update_that_keeps_losing_answers_409_and_leaves_the_other_writes(repo):
    thing = await repo.create(Thing(workspace_id="ws"))
    runs = 0

    async def always_overtaken(current: Thing) -> Thing:
        nonlocal runs
        runs += 1
        await repo.replace(msgspec.structs.replace(current, note=f"other {runs}"))
        return msgspec.structs.replace(current, note="mine")

    with pytest.raises(Conflict) as raised:
        await repo.update("ws", thing.id, always_overtaken)
    assert raised.value.status == 409
    assert "changed while it was being updated; retry" in raised.value.message
    assert runs == UPDATE_ATTEMPTS
    assert (await repo.get("ws", thing.id)).note == f"other {UPDATE_ATTEMPTS}"


async def test_an_update_of_a_missing_or_foreign_record_is_a_404_and_none_leaves_it_as_it_is(repo):
    thing = await repo.create(Thing(workspace_id="ws", note="kept"))
    with pytest.raises(NotFound):
        await repo.update("other", thing.id, lambda current: _changed(current, "x"))
    with pytest.raises(NotFound):
        await repo.update("ws", "thing-missing", lambda current: _changed(current, "x"))

    async def nothing(current: Thing) -> None:
        return None

    assert await repo.update("ws", thing.id, nothing) == thing
    assert await repo.get("ws", thing.id) == thing


async def test_replace_with_the_record_as_read_refuses_when_it_changed(repo):
    thing = await repo.create(Thing(workspace_id="ws"))
    newer = await repo.replace(msgspec.structs.replace(thing, note="newer"), expected=thing)
    with pytest.raises(RecordChanged):
        await repo.replace(msgspec.structs.replace(thing, note="stale"), expected=thing)
    assert (await repo.get("ws", thing.id)) == newer


async def test_a_rewrite_that_lost_its_race_is_dropped(repo):
    thing = await repo.create(Thing(workspace_id="ws"))
    newer = await repo.replace(msgspec.structs.replace(thing, note="newer"))
    assert not await repo.rewrite(msgspec.structs.replace(thing, note="reformed"), expected=thing)
    assert await repo.get("ws", thing.id) == newer
    assert await repo.rewrite(msgspec.structs.replace(newer, note="reformed"), expected=newer)
    assert (await repo.get("ws", thing.id)).note == "reformed"


async def test_a_record_an_older_release_encoded_otherwise_is_still_the_one_read(repo):
    """The check compares the stored document as a record: a document without the fields added since (as an older
    release wrote it) is still the record read from it, and the rewrite stores the new form."""
    await repo.store.record_put("thing", "thing-old", "ws", b'{"id": "thing-old", "workspace_id": "ws"}')
    old = await repo.get("ws", "thing-old")
    assert await repo.rewrite(msgspec.structs.replace(old, note="sealed"), expected=old)
    assert (await repo.get("ws", "thing-old")).note == "sealed"


async def _changed(current: Thing, note: str) -> Thing:
    return msgspec.structs.replace(current, note=note)


class TakingTurns(MemoryStateStore):
    """A store whose record reads and creates let every other task run first, as a networked store's do."""

    async def record_get(self, kind: str, id: str) -> Record | None:
        await asyncio.sleep(0)
        return await super().record_get(kind, id)

    async def record_create(self, kind: str, id: str, workspace: str, doc: bytes) -> bool:
        await asyncio.sleep(0)
        return await super().record_create(kind, id, workspace, doc)


async def test_two_creates_of_one_slug_at_once_store_one_and_answer_409_to_the_other():
    repo = Repository(TakingTurns(), "slug", Thing, "", "slug", "slug", scoped=True)
    answers = await asyncio.gather(repo.create(Thing(id="shared", workspace_id="ws", note="first")),
                                   repo.create(Thing(id="shared", workspace_id="ws", note="second")),
                                   return_exceptions=True)
    stored = [a for a in answers if isinstance(a, Thing)]
    refused = [a for a in answers if isinstance(a, Conflict)]
    assert len(stored) == 1 and len(refused) == 1, answers
    assert refused[0].param == "slug" and "'shared' already exists in this workspace" in refused[0].message
    assert await repo.get("ws", "shared") == stored[0]
    assert await repo.list("ws") == stored
    assert (await repo.create(Thing(id="shared", workspace_id="other"))).workspace_id == "other"  # per workspace
