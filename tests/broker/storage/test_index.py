"""OffsetIndex and TimeIndex: lookups, persistence, truncation, corruption, speed."""

from __future__ import annotations

import statistics
import struct
import sys
import time
from array import array

import pytest

from tinystream.broker.storage.index import IndexCorruptError, OffsetIndex, TimeIndex


def test_offset_index_lookup_persist_and_reload(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, new=True)
    assert index.lookup(150) == (100, 0)  # nothing indexed: scan from the start
    for i in range(1, 6):
        index.append(100 + 10 * i, 1000 * i)
    assert index.lookup(135) == (130, 3000)
    assert index.lookup(130) == (130, 3000)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(10**9) == (150, 5000)
    assert index.lookup(10**9, size_limit=4000) == (130, 3000)  # entries past a reader's snapshot are ignored
    index.flush()
    assert path.stat().st_size == 5 * 8
    assert path.read_bytes()[:8] == struct.pack(">II", 10, 1000)  # Kafka's layout: relative offset, position
    reloaded = OffsetIndex(path, 100)
    assert reloaded.entries() == index.entries() and reloaded.lookup(147) == (140, 4000)


def test_offset_index_refuses_out_of_order_entries(tmp_path):
    index = OffsetIndex(tmp_path / "x.index", 0, new=True)
    index.append(10, 100)
    with pytest.raises(ValueError):
        index.append(10, 200)
    with pytest.raises(ValueError):
        index.append(11, 100)
    with pytest.raises(ValueError):
        index.append(2**33, 300)


def test_truncation_reaches_the_file_at_once(tmp_path):
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, new=True)
    for i in range(1, 11):
        index.append(i, i * 100)
    index.flush()
    index.truncate_to_position(550)
    assert index.last_entry() == (5, 500)
    assert path.stat().st_size == 5 * 8
    index.append(6, 600)
    index.flush()
    assert OffsetIndex(path, 0).entries() == [(i, i * 100) for i in range(1, 7)]


def test_position_helpers(tmp_path):
    index = OffsetIndex(tmp_path / "x.index", 0, new=True)
    for i in range(1, 4):
        index.append(i * 10, i * 100)
    assert index.entry_at_or_before_position(250) == (20, 200)
    assert index.entry_at_or_before_position(50) is None
    assert index.position_before(300) == 200 and index.position_before(100) == 0


@pytest.mark.parametrize(
    "content",
    [b"\x00" * 7, struct.pack(">IIII", 5, 100, 5, 200), struct.pack(">IIII", 5, 100, 6, 50)],
    ids=["partial-entry", "offsets-repeat", "positions-go-back"],
)
def test_corrupt_offset_index_is_detected(tmp_path, content):
    path = tmp_path / "x.index"
    path.write_bytes(content)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, 0).load()
    # A lazy lookup does not fail: it drops the file and answers "scan from the start".
    lazy = OffsetIndex(path, 0)
    assert lazy.lookup(10) == (0, 0)
    assert path.stat().st_size == 0


def test_time_index(tmp_path):
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, 1000, new=True)
    assert index.lookup(5) is None
    assert index.maybe_append(100, 1000)
    assert not index.maybe_append(100, 1005)  # only new maxima
    assert not index.maybe_append(-1, 1005)
    assert index.maybe_append(200, 1010)
    assert index.maybe_append(300, 1010)
    assert index.lookup(99) is None
    assert index.lookup(250) == 1010 and index.lookup(150) == 1000
    index.flush()
    assert path.read_bytes()[:12] == struct.pack(">qI", 100, 0)
    reloaded = TimeIndex(path, 1000)
    assert reloaded.last_entry() == (300, 1010)
    reloaded.truncate_to_offset(1010)
    assert reloaded.last_entry() == (100, 1000) and path.stat().st_size == 12


def test_corrupt_time_index_is_detected(tmp_path):
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qIqI", 200, 0, 100, 1))
    with pytest.raises(IndexCorruptError):
        TimeIndex(path, 0).load()


def test_lookup_in_a_million_entries_is_fast(tmp_path):
    # The index of a log holding 1,000,000 batches: one entry per batch (worst case).
    count = 1_000_000
    raw = array("I", bytes(8 * count))
    raw[0::2] = array("I", range(count))
    raw[1::2] = array("I", range(0, 100 * count, 100))
    if sys.byteorder == "little":
        raw.byteswap()
    path = tmp_path / "big.index"
    path.write_bytes(raw.tobytes())
    index = OffsetIndex(path, 0)
    index.load()
    assert index.lookup(765_432) == (765_432, 76_543_200)
    samples = []
    for i in range(2000):
        target = (i * 7919) % count
        start = time.perf_counter_ns()
        index.lookup(target)
        samples.append(time.perf_counter_ns() - start)
    assert statistics.median(samples) / 1000 < 50
