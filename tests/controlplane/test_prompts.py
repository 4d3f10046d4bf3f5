"""Prompt versions written at once: each update wins a version number of its own with its own template, built on
the version before it, and the prompt ends at the latest version whatever order the updates finish in."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import msgspec
import pytest

from gateway.controlplane import prompts
from gateway.controlplane.records import Repository
from gateway.http.errors import NotFound
from gateway.state.base import Record
from gateway.state.memory import MemoryStateStore


class TakingTurns(MemoryStateStore):
    """A store whose record reads and creates let every other task run first, as a networked store's do."""

    async def record_get(self, kind: str, id: str) -> Record | None:
        await asyncio.sleep(0)
        return await super().record_get(kind, id)

    async def record_create(self, kind: str, id: str, workspace: str, doc: bytes) -> bool:
        await asyncio.sleep(0)
        return await super().record_create(kind, id, workspace, doc)


@pytest.fixture
async def made() -> tuple[prompts.PromptVersions, prompts.Prompt]:
    repo = Repository(TakingTurns(), prompts.KIND, prompts.Prompt, "pp-", "prompt", "prompt_id")
    versions = prompts.PromptVersions(repo)
    prompt, _ = prompts.build({"name": "greeter", "model": "m", "messages": [message("v1")]}, "ws")
    prompt = await repo.create(prompt)
    await versions.first(prompt)
    return versions, prompt


def message(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def change(**fields: Any) -> Callable[[prompts.Prompt], prompts.Prompt]:
    """An update of ``fields`` as the PUT route applies it to a base version."""

    def applied_to(base: prompts.Prompt) -> prompts.Prompt:
        merged = {"name": base.name, "model": base.model, "messages": base.messages, **fields}
        prompt, _ = prompts.build(merged, base.workspace_id)
        return msgspec.structs.replace(prompt, id=base.id, created_at=base.created_at)

    return applied_to


async def test_updates_at_once_win_a_number_each_and_the_later_keeps_the_earlier_change(made):
    versions, prompt = made
    renamed, reworded = await asyncio.gather(versions.next(prompt, change(name="renamed")),
                                             versions.next(prompt, change(messages=[message("v2")])))
    assert sorted((renamed.version, reworded.version)) == [2, 3]
    first, later = sorted((renamed, reworded), key=lambda v: v.version)
    assert (later.name, later.messages) == ("renamed", [message("v2")])  # built on the version numbered before it
    assert (first.name == "renamed") != (first.messages == [message("v2")])  # the earlier holds its change only
    await asyncio.gather(versions.make_current(renamed), versions.make_current(reworded))
    assert await versions.repo.get("ws", prompt.id) == later
    assert [v.version for v in await versions.list(prompt)] == [1, 2, 3]
    assert await versions.get(prompt, first.version) == first


async def test_a_slow_update_never_takes_the_prompt_back_to_its_earlier_version(made):
    versions, prompt = made
    slow = await versions.next(prompt, change(messages=[message("slow")]))
    fast = await versions.next(prompt, change(messages=[message("fast")]))  # read the same prompt: number 2 taken
    assert (slow.version, fast.version) == (2, 3)
    await versions.make_current(fast)
    await versions.make_current(slow)  # finishes last: the prompt stays at the later version
    assert await versions.repo.get("ws", prompt.id) == fast
    assert (await versions.get(prompt, 2)).messages == [message("slow")]  # each version keeps its own template
    assert (await versions.get(prompt, 3)).messages == [message("fast")]


async def test_an_update_of_a_prompt_deleted_meanwhile_is_a_404_and_leaves_no_version(made):
    versions, prompt = made
    await versions.repo.delete("ws", prompt.id)  # the delete ends before the update writes its version
    await versions.delete_all(prompt)
    late = await versions.next(prompt, change(name="late"))
    with pytest.raises(NotFound) as raised:
        await versions.make_current(late)
    assert raised.value.param == "prompt_id"
    assert await versions.list(prompt) == []
