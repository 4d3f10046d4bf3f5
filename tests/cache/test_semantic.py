"""The semantic step's store side: entries published to the store's log, followed into a worker's index, searched
within their partition with the literal guard, expired, bounded, and kept to their own embedding model."""

from __future__ import annotations

import numpy as np

from gateway.cache.prompt import chat_prompt
from gateway.cache.semantic import LOG_NAME, SemanticCache, semantic_partition, semantic_prompt
from gateway.schema.config import Config
from gateway.state.memory import MemoryStateStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class FakeEmbedder:
    """Unit vectors chosen by the test: ``vectors[text]``; None for texts it does not know (a full pool)."""

    def __init__(self, model_id: str = "fake", dims: int = 16) -> None:
        self.model_id = model_id
        self.dimensions = dims
        self.vectors: dict[str, np.ndarray] = {}

    def set(self, text: str, *values: float) -> np.ndarray:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        vector[: len(values)] = values
        vector /= np.linalg.norm(vector)
        self.vectors[text] = vector
        return vector

    async def embed(self, text: str):
        return self.vectors.get(text)

    async def close(self) -> None:
        return None


def prompt(text: str):
    return chat_prompt([{"role": "user", "content": text}])


async def make(store=None, embedder=None, clock=None, max_entries=1000) -> SemanticCache:
    return SemanticCache(store or MemoryStateStore(), embedder or FakeEmbedder(), 0.9, max_entries,
                         clock or Clock())


async def test_a_published_entry_is_found_by_a_close_vector_with_the_same_literals():
    embedder = FakeEmbedder()
    cache = await make(embedder=embedder)
    stored = prompt("Convert 10 USD to EUR")
    vector = embedder.set("stored", 1.0, 0.1)
    await cache.publish(b"p1", "key-1", stored, vector, int((cache.clock() + 60) * 1000))
    assert await cache.catch_up() == 1 and len(cache) == 1
    near = embedder.set("near", 1.0, 0.2)
    assert cache.search(b"p1", near, prompt("Please convert 10 USD to EUR").literals) == "key-1"
    assert cache.search(b"p1", near, prompt("Convert 100 USD to EUR").literals) is None  # the literal guard
    assert cache.search(b"p2", near, stored.literals) is None  # another partition
    far = embedder.set("far", 0.1, 1.0)
    assert cache.search(b"p1", far, stored.literals) is None  # below the threshold


async def test_a_missing_vector_is_embedded_when_publishing_and_skipped_when_it_cannot_be():
    embedder = FakeEmbedder()
    cache = await make(embedder=embedder)
    embedder.set("How do I sort?", 1.0)
    await cache.publish(b"p", "k1", prompt("How do I sort?"), None, int((cache.clock() + 60) * 1000))
    await cache.publish(b"p", "k2", prompt("no vector for this"), None, int((cache.clock() + 60) * 1000))
    await cache.catch_up()  # the first vector also started the background follower: either may read the entry
    assert len(cache) == 1 and cache.search(b"p", embedder.vectors["How do I sort?"], ()) == "k1"
    await cache.close()


async def test_every_worker_follows_the_same_store():
    store = MemoryStateStore()
    embedder = FakeEmbedder()
    writer, reader = await make(store, embedder), await make(store, embedder)
    vector = embedder.set("q", 0.3, 1.0)
    await writer.publish(b"p", "k", prompt("q"), vector, int((writer.clock() + 60) * 1000))
    assert reader.search(b"p", vector, ()) is None  # not read yet
    await reader.catch_up()
    assert reader.search(b"p", vector, ()) == "k"


async def test_expired_entries_are_never_answered_and_are_purged():
    clock = Clock()
    embedder = FakeEmbedder()
    cache = await make(embedder=embedder, clock=clock)
    vector = embedder.set("q", 1.0)
    await cache.publish(b"p", "k", prompt("q"), vector, int((clock.now + 5) * 1000))
    await cache.catch_up()
    assert cache.search(b"p", vector, ()) == "k"
    clock.now += 6
    assert cache.search(b"p", vector, ()) is None
    cache.purge()
    assert len(cache) == 0


async def test_entries_of_another_model_are_ignored_and_the_index_is_bounded():
    store = MemoryStateStore()
    other = await make(store, FakeEmbedder("other-model"))
    mine_embedder = FakeEmbedder()
    mine = await make(store, mine_embedder, max_entries=3)
    vector = mine_embedder.set("q", 1.0)
    await other.publish(b"p", "theirs", prompt("q"), vector, int((other.clock() + 60) * 1000))
    for i in range(5):
        await mine.publish(b"p", f"k{i}", prompt("q"), mine_embedder.set(f"v{i}", 1.0, i),
                           int((mine.clock() + 60) * 1000))
    await mine.catch_up()
    assert len(mine) == 3  # the newest three
    assert mine.search(b"p", mine_embedder.vectors["v0"], ()) != "k0"
    entries = await store.log_read(LOG_NAME, 0, 100)
    assert len(entries) == 3  # the log keeps the newest GATEWAY_SEMANTIC_CACHE_MAX_ENTRIES too


def test_the_partition_is_everything_but_the_embedded_text():
    config = Config(provider="vendorA", api_key="k")
    body = {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": "What is a gateway?"}], "temperature": 0}
    sp = semantic_prompt("chat", body)

    def part(changed: dict, model_id: str = "fake") -> bytes:
        doc = {**body, **changed}
        return semantic_partition(b"ws", config, "chat", doc, semantic_prompt("chat", doc), model_id)

    base = part({})
    assert part({"messages": [body["messages"][0], {"role": "user", "content": "Define a gateway"}]}) == base
    assert part({"stream": True, "user": "u"}) == base
    assert part({"temperature": 1}) != base
    assert part({"messages": [{"role": "system", "content": "be long"}, body["messages"][1]]}) != base
    assert part({}, model_id="other") != base
    assert sp.text == "What is a gateway?"
    assert semantic_prompt("embeddings", {"input": "x"}) is None
    assert semantic_prompt("chat", {"messages": [{"role": "assistant", "content": "x"}]}) is None


async def test_a_lookup_reads_what_was_stored_before_it_without_waiting_for_the_poll():
    store = MemoryStateStore()
    embedder = FakeEmbedder()
    writer, reader = await make(store, embedder), await make(store, embedder)
    vector = embedder.set("q", 0.3, 1.0)
    assert reader.read_soon() is None  # not following the log before its first vector
    assert await reader.embed("q") is not None
    await reader.synced(None)  # the follower's first read, or one of its own
    await writer.publish(b"p", "k", prompt("q"), vector, int((writer.clock() + 60) * 1000))
    read = reader.read_soon()
    assert read is not None and reader.read_soon() is read  # callers before a read starts share it
    await reader.synced(read)
    assert reader.search(b"p", vector, ()) == "k"  # long before the next poll
    await reader.close()
