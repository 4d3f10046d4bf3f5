"""The StateStore contract, on every backend: key-value, cache space, leases, records and logs."""

from __future__ import annotations

import asyncio
import uuid

from gateway.state.base import RECORD_CHANGE_LOG, Record

# generous: a TTL of SHORT_MS is surely over after WAIT_S on a slow, busy machine
SHORT_MS = 150
WAIT_S = 0.5


def name() -> str:
    return uuid.uuid4().hex[:12]


async def test_set_get_delete_round_trip(store):
    key = name()
    assert await store.get(key) is None
    await store.set(key, b"\x00value\xff")
    assert await store.get(key) == b"\x00value\xff"
    await store.set(key, b"other")
    assert await store.get(key) == b"other"
    await store.delete(key)
    assert await store.get(key) is None
    await store.delete(key)  # missing: no error


async def test_values_expire_after_their_ttl(store):
    key, keep = name(), name()
    await store.set(key, b"v", ttl_ms=SHORT_MS)
    await store.set(keep, b"v", ttl_ms=60_000)
    assert await store.get(key) == b"v"
    await asyncio.sleep(WAIT_S)
    assert await store.get(key) is None
    assert await store.get(keep) == b"v"


async def test_set_if_absent_stores_only_once_until_expiry(store):
    key = name()
    assert await store.set_if_absent(key, b"first", ttl_ms=SHORT_MS)
    assert not await store.set_if_absent(key, b"second", ttl_ms=SHORT_MS)
    assert await store.get(key) == b"first"
    await asyncio.sleep(WAIT_S)
    assert await store.set_if_absent(key, b"third")
    assert await store.get(key) == b"third"


async def test_incr_counts_and_reads_back_as_decimal_bytes(store):
    key = name()
    assert await store.incr(key) == 1
    assert await store.incr(key, 5) == 6
    assert await store.incr(key, -2) == 4
    assert await store.get(key) == b"4"


async def test_incr_sets_the_ttl_only_when_creating(store):
    key = name()
    assert await store.incr(key, 1, ttl_ms=SHORT_MS) == 1
    assert await store.incr(key, 1, ttl_ms=60_000) == 2  # does not extend the first TTL
    await asyncio.sleep(WAIT_S)
    assert await store.get(key) is None
    assert await store.incr(key, 1) == 1


async def test_concurrent_incr_loses_no_update(store):
    key = name()
    results = await asyncio.gather(*(store.incr(key) for _ in range(50)))
    assert sorted(results) == list(range(1, 51))


async def test_spaces_do_not_share_keys(store):
    key = name()
    await store.set(key, b"kv")
    await store.cache_set(key, b"cache", 60_000)
    assert await store.get(key) == b"kv"
    assert await store.cache_get(key) == b"cache"
    assert await store.usage("s", [key]) == [0]


async def test_cache_round_trip_and_ttl(store):
    key, short = name(), name()
    assert await store.cache_get(key) is None
    await store.cache_set(key, b'{"choices": []}', 60_000)
    await store.cache_set(short, b"x", SHORT_MS)
    assert await store.cache_get(key) == b'{"choices": []}'
    await store.cache_set(key, b"replaced", 60_000)
    assert await store.cache_get(key) == b"replaced"
    await asyncio.sleep(WAIT_S)
    assert await store.cache_get(short) is None
    assert await store.cache_get(key) == b"replaced"


async def test_a_lease_has_one_holder_until_released_or_expired(store):
    key = name()
    assert await store.lease(key, "worker-a", SHORT_MS)
    assert not await store.lease(key, "worker-b", 60_000)
    assert await store.lease(key, "worker-a", SHORT_MS)  # renewal
    assert not await store.release(key, "worker-b")
    assert await store.release(key, "worker-a")
    assert not await store.release(key, "worker-a")
    assert await store.lease(key, "worker-b", SHORT_MS)
    await asyncio.sleep(WAIT_S)
    assert await store.lease(key, "worker-c", 60_000)  # b's lease ran out
    assert not await store.lease(key, "worker-b", 60_000)


async def test_concurrent_lease_attempts_have_exactly_one_winner(store):
    key = name()
    won = await asyncio.gather(*(store.lease(key, f"h{i}", 60_000) for i in range(20)))
    assert won.count(True) == 1


async def test_records_put_get_list_delete(store):
    kind = "k" + name()
    version = await store.records_version()
    v1 = await store.record_put(kind, "b", "ws1", b"doc-b")
    v2 = await store.record_put(kind, "a", "ws1", b"doc-a")
    v3 = await store.record_put(kind, "c", "ws2", b"doc-c")
    assert version < v1 < v2 < v3 == await store.records_version()
    assert await store.record_get(kind, "a") == Record(kind, "a", "ws1", b"doc-a")
    assert await store.record_get(kind, "zz") is None
    assert [r.id for r in await store.record_list(kind)] == ["a", "b", "c"]
    assert [r.id for r in await store.record_list(kind, "ws1")] == ["a", "b"]
    assert [r.doc for r in await store.record_list(kind, "ws2")] == [b"doc-c"]
    assert await store.record_list("other" + kind) == []
    assert await store.record_delete(kind, "a")
    assert not await store.record_delete(kind, "a")
    assert await store.records_version() == v3 + 1
    assert await store.record_get(kind, "a") is None
    assert [r.id for r in await store.record_list(kind, "ws1")] == ["b"]


async def test_each_record_kind_counts_its_own_changes_and_this_process_hears_of_each(store):
    kind, other = "k" + name(), "o" + name()
    heard: list[str] = []
    store.on_record_change(lambda kind, id: heard.append(kind))
    before = await store.record_versions([kind, other])
    assert before.kinds == (0, 0)
    await store.record_put(kind, "a", "ws", b"1")
    await store.record_put(kind, "a", "ws", b"2")
    await store.record_put(other, "b", "ws", b"1")
    assert not await store.record_delete(other, "missing")  # nothing deleted: nothing counted, nobody told
    assert await store.record_delete(kind, "a")
    after = await store.record_versions([other, kind, "never-written"])
    assert after.kinds == (1, 3, 0)
    assert after.total == before.total + 4 == await store.records_version()
    assert after.unkinded == before.unkinded == 0
    assert heard == [kind, kind, other, kind]


async def test_a_record_moved_to_another_workspace_leaves_the_first(store):
    kind = "k" + name()
    await store.record_put(kind, "x", "ws1", b"1")
    await store.record_put(kind, "x", "ws2", b"2")
    assert await store.record_list(kind, "ws1") == []
    assert await store.record_list(kind, "ws2") == [Record(kind, "x", "ws2", b"2")]


async def test_a_create_refuses_a_taken_id_and_leaves_the_first_record_as_it_was(store):
    kind = "k" + name()
    heard: list[str] = []
    store.on_record_change(lambda kind, id: heard.append(id))
    before = await store.record_versions([kind])
    assert await store.record_create(kind, "a", "ws1", b"first")
    assert not await store.record_create(kind, "a", "ws2", b"second")  # another workspace: the id is still taken
    assert await store.record_get(kind, "a") == Record(kind, "a", "ws1", b"first")
    assert await store.record_list(kind, "ws1") == [Record(kind, "a", "ws1", b"first")]
    assert await store.record_list(kind, "ws2") == []  # the lost create left no listing behind
    assert (await store.record_versions([kind])).kinds[0] == before.kinds[0] + 1  # only the stored create counted
    assert heard == ["a"]
    assert await store.record_delete(kind, "a")
    assert await store.record_create(kind, "a", "ws2", b"again")  # a deleted id is free again
    assert await store.record_list(kind) == [Record(kind, "a", "ws2", b"again")]


async def test_a_create_already_done_answers_stored(store):
    """A create retried after its reply was lost finds its own doc stored: it answers as the first attempt did."""
    kind = "k" + name()
    assert await store.record_create(kind, "a", "ws1", b"v1")
    before = await store.record_versions([kind])
    assert await store.record_create(kind, "a", "ws1", b"v1")
    assert (await store.record_versions([kind])).kinds == before.kinds  # nothing changed the second time
    assert await store.record_list(kind) == [Record(kind, "a", "ws1", b"v1")]


async def test_concurrent_creates_of_one_id_have_exactly_one_winner(store):
    kind = "k" + name()
    won = await asyncio.gather(*(store.record_create(kind, "a", f"ws{i}", f"w{i}".encode()) for i in range(20)))
    assert won.count(True) == 1
    winner = won.index(True)
    assert await store.record_get(kind, "a") == Record(kind, "a", f"ws{winner}", f"w{winner}".encode())
    assert [r.workspace for r in await store.record_list(kind)] == [f"ws{winner}"]
    assert [await store.record_list(kind, f"ws{i}") != [] for i in range(20)] == [i == winner for i in range(20)]


async def test_a_conditional_record_write_stores_only_over_the_doc_it_expects(store):
    kind = "k" + name()
    heard: list[str] = []
    store.on_record_change(lambda kind, id: heard.append(id))
    await store.record_put(kind, "a", "ws1", b"v1")
    before = await store.record_versions([kind])
    assert await store.record_put_if(kind, "a", "ws1", b"v2", expected=b"v1")
    assert await store.record_get(kind, "a") == Record(kind, "a", "ws1", b"v2")
    assert not await store.record_put_if(kind, "a", "ws1", b"v3", expected=b"v1")  # changed since v1 was read
    assert not await store.record_put_if(kind, "a", "ws1", b"v3", expected=b"v")  # a prefix is not the doc
    assert await store.record_get(kind, "a") == Record(kind, "a", "ws1", b"v2")
    assert not await store.record_put_if(kind, "missing", "ws1", b"v1", expected=b"v1")  # never creates
    assert await store.record_get(kind, "missing") is None
    after = await store.record_versions([kind])
    assert after.kinds[0] == before.kinds[0] + 1  # only the stored write counted
    assert heard == ["a", "a"]  # the put and the one conditional write that stored
    assert await store.record_delete(kind, "a")
    assert not await store.record_put_if(kind, "a", "ws1", b"v3", expected=b"v2")  # deleted since it was read
    assert await store.record_get(kind, "a") is None


async def test_a_conditional_record_write_already_done_answers_stored(store):
    """A call retried after its reply was lost finds its own doc stored: it answers as the first attempt did."""
    kind = "k" + name()
    await store.record_put(kind, "a", "ws1", b"v1")
    assert await store.record_put_if(kind, "a", "ws1", b"v2", expected=b"v1")
    assert await store.record_put_if(kind, "a", "ws1", b"v2", expected=b"v1")
    assert await store.record_get(kind, "a") == Record(kind, "a", "ws1", b"v2")


async def test_a_conditional_record_write_may_move_the_record_to_another_workspace(store):
    kind = "k" + name()
    await store.record_put(kind, "x", "ws1", b"1")
    assert await store.record_put_if(kind, "x", "ws2", b"2", expected=b"1")
    assert await store.record_list(kind, "ws1") == []
    assert await store.record_list(kind, "ws2") == [Record(kind, "x", "ws2", b"2")]


async def test_a_conditional_record_delete_deletes_only_the_doc_it_expects(store):
    kind = "k" + name()
    heard: list[str] = []
    store.on_record_change(lambda kind, id: heard.append(id))
    await store.record_put(kind, "a", "ws1", b"v1")
    await store.record_put(kind, "a", "ws1", b"v2")
    before = await store.record_versions([kind])
    assert not await store.record_delete_if(kind, "a", expected=b"v1")  # changed since v1 was read
    assert not await store.record_delete_if(kind, "missing", expected=b"v1")
    assert await store.record_get(kind, "a") == Record(kind, "a", "ws1", b"v2")
    assert (await store.record_versions([kind])).kinds == before.kinds  # nothing deleted: nothing counted
    assert await store.record_delete_if(kind, "a", expected=b"v2")
    assert await store.record_get(kind, "a") is None and await store.record_list(kind, "ws1") == []
    assert (await store.record_versions([kind])).kinds[0] == before.kinds[0] + 1
    assert heard == ["a", "a", "a"]


async def test_concurrent_conditional_writes_over_one_read_have_exactly_one_winner(store):
    kind = "k" + name()
    await store.record_put(kind, "a", "ws", b"read")
    won = await asyncio.gather(*(store.record_put_if(kind, "a", "ws", f"w{i}".encode(), expected=b"read")
                                 for i in range(20)))
    assert won.count(True) == 1
    assert (await store.record_get(kind, "a")).doc == f"w{won.index(True)}".encode()


async def test_log_append_and_read_in_order(store):
    log = name()
    assert await store.log_read(log, 0, 10) == []
    seqs = [await store.log_append(log, f"e{i}".encode(), 100) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    assert await store.log_read(log, 0, 10) == [(i + 1, f"e{i}".encode()) for i in range(5)]
    assert await store.log_read(log, 3, 10) == [(4, b"e3"), (5, b"e4")]
    assert await store.log_read(log, 1, 2) == [(2, b"e1"), (3, b"e2")]
    assert await store.log_read(log, 5, 10) == []


async def test_a_log_keeps_only_the_newest_items_and_shows_the_gap(store):
    log = name()
    for i in range(10):
        await store.log_append(log, str(i).encode(), 3)
    items = await store.log_read(log, 2, 10)
    assert items == [(8, b"7"), (9, b"8"), (10, b"9")]  # first seq != 3: the reader knows it missed some
    assert await store.log_append(log, b"10", 3) == 11


async def test_a_caller_cancelled_during_a_call_ends_cancelled_wherever_the_cancel_lands(store):
    """A worker stops its loops by cancelling them: a cancel landing at any loop turn of a write then a read must
    end the caller, never let it carry on (redis-py's write path could swallow it on Python 3.11)."""
    key, carried_on = name(), []
    for turns in range(40):
        async def caller() -> str:
            await store.set(key, b"v")
            await store.get(key)
            return "carried on"

        task = asyncio.create_task(caller())
        for _ in range(turns):
            await asyncio.sleep(0)
        if task.done():
            break
        task.cancel()
        try:
            carried_on.append((turns, await task))
        except asyncio.CancelledError:
            pass
    assert carried_on == []


async def test_a_kinds_change_log_names_the_records_changed_after_a_count(store):
    kind, other = "k" + name(), "o" + name()
    start = await store.record_versions([kind, other], since=(0, 0))
    assert start.kinds == (0, 0) and start.changed == ((), ())
    await store.record_put(kind, "a", "ws1", b"1")
    await store.record_put(kind, "b", "ws2", b"1")
    assert await store.record_delete(kind, "a")
    await store.record_put(other, "x:y", "ws1", b"1")  # an id may hold the log's separator
    after = await store.record_versions([kind, other, "never-written"], since=(0, 0, 0))
    assert after.kinds == (3, 1, 0)
    assert after.changed == (("a", "b"), ("x:y",), ())
    later = await store.record_versions([kind, other], since=(2, -1))
    assert later.changed == (("a",), None)  # after change 2 only the delete of a; -1: the ids were not asked for
    assert (await store.record_versions([kind])).changed == ()  # nothing asked: nothing read


async def test_past_its_length_a_change_log_says_it_no_longer_covers_the_gap(store):
    kind = "k" + name()
    for i in range(RECORD_CHANGE_LOG + 1):
        await store.record_put(kind, f"r{i}", "ws", b"1")
    count = RECORD_CHANGE_LOG + 1
    versions = await store.record_versions([kind], since=(0,))
    assert versions.kinds == (count,) and versions.changed == (None,)  # the first change was trimmed
    covered = await store.record_versions([kind], since=(1,))
    assert covered.changed == (tuple(sorted(f"r{i}" for i in range(1, count))),)
    assert (await store.record_versions([kind], since=(count + 5,))).changed == (None,)  # a store that restarted
