"""The rollup tables behind the aggregates: batches from several writers add up, old slots are pruned, histogram
buckets cover every latency and a histogram survives its compact encoding and a batch's merge into it."""

from __future__ import annotations

import sqlite3
import threading

from hypothesis import given
from hypothesis import strategies as st

from gateway.observability.aggregates import report
from gateway.observability.rollups import (
    BUCKETS_PER_OCTAVE,
    MAX_BUCKET,
    RequestStats,
    RollupStore,
    add_into,
    bucket,
    bucket_value,
    decode_hist,
    encode_hist,
    merge_encoded,
    new_hist,
    quantile,
)

NOW = 1_800_000_000.0
WIDTH = 2 ** (1 / BUCKETS_PER_OCTAVE)


def stats(ts: float, workspace: str = "default", latency: float = 10.0) -> RequestStats:
    return RequestStats(ts, workspace, "vendorA", "gpt-4o-mini", 200, latency, 1.0, 10, 20, 0.001)


def test_several_writers_on_one_file_lose_nothing(tmp_path):
    path = str(tmp_path / "logs.db")
    writers = [RollupStore(path) for _ in range(3)]

    def write(rollups: RollupStore) -> None:
        for _ in range(20):
            rollups.add([stats(NOW - 10) for _ in range(25)], now=NOW)

    threads = [threading.Thread(target=write, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert report(writers[0], "15m", None, now=NOW).totals.requests == 3 * 20 * 25
    for w in writers:
        w.close()


def test_old_slots_are_pruned_as_new_batches_arrive(tmp_path):
    store = RollupStore(str(tmp_path / "logs.db"))
    store.add([stats(NOW - 3 * 86400)], now=NOW - 3 * 86400)
    store.add([stats(NOW)], now=NOW)
    db = sqlite3.connect(store.path)
    for table in ("log_rollups", "log_latency", "log_slot_latency"):
        for res in (10, 60, 900):
            slots = [row[0] for row in db.execute(f"SELECT slot FROM {table} WHERE res = ?", (res,))]
            assert slots == [int(NOW // res * res)], (table, res)
    db.close()
    store.close()


def test_buckets_cover_the_range_monotonically():
    values = [0.001, 0.01, 0.05, 1, 2, 10, 100, 1000, 60_000, 10**9]
    buckets = [bucket(v) for v in values]
    assert buckets == sorted(buckets) and buckets[0] == 0
    for v in (0.5, 3.3, 250.0, 42_000.0):
        assert v / WIDTH <= bucket_value(bucket(v)) <= v * WIDTH
    assert quantile(new_hist(), 0.5) is None
    assert bucket(10**12) == MAX_BUCKET


@given(st.dictionaries(st.integers(0, MAX_BUCKET), st.integers(1, 10**6), max_size=40),
       st.dictionaries(st.integers(0, MAX_BUCKET), st.integers(1, 10**6), max_size=40))
def test_histograms_survive_encoding_and_add_up(a, b):
    ha, hb = new_hist(), new_hist()
    for index, n in a.items():
        ha[index] = n
    for index, n in b.items():
        hb[index] = n
    total = new_hist()
    add_into(total, *decode_hist(encode_hist(ha)))
    add_into(total, *decode_hist(encode_hist(hb)))
    assert total == [x + y for x, y in zip(ha, hb)]


@given(st.dictionaries(st.integers(0, MAX_BUCKET), st.integers(1, 10**6), max_size=40),
       st.dictionaries(st.integers(0, MAX_BUCKET), st.integers(1, 10**6), max_size=40))
def test_a_batch_merged_into_a_stored_histogram_encodes_as_the_full_length_sum(stored, batch):
    """Each batch's counts are merged into the stored histogram over the buckets either holds: the bytes are the
    ones the full-length histograms, added and encoded, give (empty on either side included)."""
    full = new_hist()
    for index, n in stored.items():
        full[index] += n
    blob = encode_hist(full)
    for index, n in batch.items():
        full[index] += n
    assert merge_encoded(blob, batch) == encode_hist(full)
    only_batch = new_hist()
    for index, n in batch.items():
        only_batch[index] = n
    assert merge_encoded(None, batch) == encode_hist(only_batch)


def test_quantiles_rank_the_buckets():
    hist = new_hist()
    hist[10], hist[20], hist[30] = 49, 50, 1
    assert quantile(hist, 0.5) == round(bucket_value(20), 3)
    assert quantile(hist, 0.49) == round(bucket_value(10), 3)
    assert quantile(hist, 0.999) == round(bucket_value(30), 3)
