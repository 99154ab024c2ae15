"""Leader-epoch cache rules (Kafka's LeaderEpochFileCache) and its checkpoint file."""

from __future__ import annotations

import pytest

from tinystream.broker.storage.base import EpochEntry
from tinystream.broker.storage.checkpoint import CheckpointFormatError, OffsetCheckpoint
from tinystream.broker.storage.leader_epoch import LeaderEpochCache, LeaderEpochCheckpoint


def entries(*pairs):
    return [EpochEntry(e, o) for e, o in pairs]


def test_assign_keeps_both_columns_increasing():
    cache = LeaderEpochCache()
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing new
    assert cache.assign(2, 10)
    assert not cache.assign(-1, 20)
    assert cache.entries() == entries((0, 0), (2, 10))
    # A new entry that breaks monotonicity removes the entries it contradicts (Kafka's rule).
    assert cache.assign(3, 8)
    assert cache.entries() == entries((0, 0), (3, 8))


def test_end_offset_for_epoch_matches_kafka():
    cache = LeaderEpochCache(entries((1, 0), (3, 10), (5, 20)))
    assert cache.end_offset_for_epoch(5, 30) == (5, 30)  # latest: the log end
    assert cache.end_offset_for_epoch(3, 30) == (3, 20)
    assert cache.end_offset_for_epoch(4, 30) == (3, 20)  # unknown epoch: the largest below it
    assert cache.end_offset_for_epoch(0, 30) == (0, 0)  # below the first: (requested, first start)
    assert cache.end_offset_for_epoch(6, 30) == (-1, -1)  # above every epoch
    assert cache.end_offset_for_epoch(-1, 30) == (-1, -1)
    assert LeaderEpochCache().end_offset_for_epoch(0, 5) == (-1, -1)
    assert cache.epoch_for_offset(15) == 3 and cache.epoch_for_offset(-1) == -1


def test_truncation_from_both_ends():
    cache = LeaderEpochCache(entries((1, 0), (3, 10), (5, 20)))
    cache.truncate_from_end(20)
    assert cache.entries() == entries((1, 0), (3, 10))
    cache.truncate_from_start(15)
    assert cache.entries() == entries((3, 15))
    cache.truncate_from_start(15)
    assert cache.entries() == entries((3, 15))
    cache.clear()
    assert cache.entries() == []


def test_checkpoint_written_atomically_on_every_change(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(checkpoint=LeaderEpochCheckpoint(path))
    cache.assign(1, 0)
    cache.assign(4, 7)
    assert path.read_text() == "0\n2\n1 0\n4 7\n"  # Kafka's format: version, count, "epoch offset"
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()
    assert LeaderEpochCheckpoint(path).read() == entries((1, 0), (4, 7))
    cache.truncate_from_end(7)
    assert LeaderEpochCheckpoint(path).read() == entries((1, 0))


@pytest.mark.parametrize(
    "content", ["1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\n2\n5 0\n4 9\n", "\xff"], ids=["version", "count", "width", "order", "binary"]
)
def test_corrupt_checkpoint_is_reported(tmp_path, content):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(CheckpointFormatError):
        LeaderEpochCheckpoint(path).read()


def test_missing_checkpoint_reads_as_none(tmp_path):
    assert LeaderEpochCheckpoint(tmp_path / "nothing").read() is None


def test_offset_checkpoint(tmp_path):
    checkpoint = OffsetCheckpoint(tmp_path / "log-start-offset-checkpoint")
    assert checkpoint.read() is None
    checkpoint.write(42)
    assert checkpoint.read() == 42
    (tmp_path / "log-start-offset-checkpoint").write_text("garbage")
    assert checkpoint.read() is None
