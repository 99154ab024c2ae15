"""SegmentedLog on disk: files, reopening, crash recovery, index rebuilds, disk errors, flushing."""

from __future__ import annotations

import errno
import os

import pytest

from tinystream.broker.storage import open_log
from tinystream.broker.storage.base import EpochEntry, LogConfig, LogStorageError
from tinystream.broker.storage.batch import check_batch, iter_batches
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog


def fill(log, make_batch, count, *, records=1, epoch=0, value_size=10):
    return [log.append(make_batch(records, value_size=value_size, timestamp=i), leader_epoch=epoch, now_ms=i) for i in range(count)]


def all_batches(log):
    return [(h.base_offset, bytes(data)) for h, data in log.batches_from(log.log_start_offset)]


def test_files_are_named_like_kafkas(tmp_path, make_batch):
    size = len(make_batch())
    with SegmentedLog.open(tmp_path, LogConfig(segment_bytes=2 * size), now_ms=0) as log:
        fill(log, make_batch, 3)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000002.index", "00000000000000000002.log", "00000000000000000002.timeindex",
        "leader-epoch-checkpoint", "log-start-offset-checkpoint",
    ]


def test_reopen_keeps_everything(tmp_path, make_batch):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    for epoch in range(4):
        fill(log, make_batch, 5, records=2, epoch=epoch)
    log.advance_log_start(13)
    before = (log.log_start_offset, log.log_end_offset, log.segment_count(), log.epoch_entries(), all_batches(log))
    log.close()
    again = open_log(tmp_path, config, now_ms=99)
    assert (again.log_start_offset, again.log_end_offset, again.segment_count(), again.epoch_entries(),
            all_batches(again)) == before
    assert again.append(make_batch(), leader_epoch=4, now_ms=100).base_offset == 40
    again.close()


def test_crash_without_close_loses_nothing_written(tmp_path, make_batch):
    # No close, no flush: the page cache holds the data, the indexes were never written.
    config = LogConfig(index_interval_bytes=64)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    fill(log, make_batch, 50)
    expected = all_batches(log)
    for segment in log._segments:
        segment.close()  # simulate the process dying: no seal, no index flush
    again = SegmentedLog.open(tmp_path, config, now_ms=0)
    assert all_batches(again) == expected and again.log_end_offset == 50
    assert again.read(37, 1).first_offset == 37
    again.close()


def _build_closed_log(path, make_batch, count=6):
    log = SegmentedLog.open(path, LogConfig(index_interval_bytes=1), now_ms=0)
    fill(log, make_batch, count, records=3, value_size=30)
    batches = all_batches(log)
    log.close()
    return batches


def test_torn_tail_is_cut_at_every_byte_of_the_last_batch(tmp_path, make_batch):
    batches = _build_closed_log(tmp_path / "orig", make_batch)
    log_bytes = (tmp_path / "orig" / "00000000000000000000.log").read_bytes()
    last_start = len(log_bytes) - len(batches[-1][1])
    for cut in range(last_start, len(log_bytes)):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        for name in os.listdir(tmp_path / "orig"):
            (directory / name).write_bytes((tmp_path / "orig" / name).read_bytes())
        (directory / "00000000000000000000.log").write_bytes(log_bytes[:cut])
        log = SegmentedLog.open(directory, LogConfig(index_interval_bytes=1), now_ms=0)
        assert all_batches(log) == batches[:-1], cut
        assert log.log_end_offset == batches[-1][0]
        assert log.epoch_entries() == [EpochEntry(0, 0)]
        appended = log.append(make_batch(), leader_epoch=1, now_ms=0)
        assert appended.base_offset == batches[-1][0] and appended.position == last_start
        assert log.read(appended.base_offset, 1).first_offset == appended.base_offset
        log.close()
        assert (directory / "00000000000000000000.log").stat().st_size == last_start + len(make_batch())


def test_flipped_bytes_in_the_last_batch(tmp_path, make_batch):
    batches = _build_closed_log(tmp_path / "orig", make_batch, count=4)
    log_bytes = (tmp_path / "orig" / "00000000000000000000.log").read_bytes()
    last_start = len(log_bytes) - len(batches[-1][1])
    survived = 0
    for at in range(last_start, len(log_bytes)):
        directory = tmp_path / f"flip{at}"
        directory.mkdir()
        for name in os.listdir(tmp_path / "orig"):
            (directory / name).write_bytes((tmp_path / "orig" / name).read_bytes())
        flipped = bytearray(log_bytes)
        flipped[at] ^= 0x10
        (directory / "00000000000000000000.log").write_bytes(bytes(flipped))
        log = SegmentedLog.open(directory, LogConfig(index_interval_bytes=1), now_ms=0)
        kept = all_batches(log)
        assert kept[:-1] == batches[:-1] or kept == batches[:-1], at
        for _offset, data in kept:
            check_batch(data, strict=False)  # whatever survived is a valid batch
        if len(kept) == len(batches):
            survived += 1
            # Only the fields outside the CRC (baseOffset, batchLength's neighbours) can flip unnoticed.
            assert at - last_start < 17, at
        end = log.log_end_offset
        assert log.append(make_batch(), leader_epoch=0, now_ms=0).base_offset == end
        log.close()
    assert survived < 17  # most flips are caught (the CRC covers bytes 21..end)


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path, make_batch):
    size = len(make_batch())
    config = LogConfig(segment_bytes=10 * size, index_interval_bytes=size)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    fill(log, make_batch, 35)
    expected = all_batches(log)
    index_files = sorted(p for p in tmp_path.iterdir() if p.suffix == ".index")
    good_index = index_files[0].read_bytes()
    log.close()
    index_files[0].unlink()  # closed segment: missing index
    index_files[1].write_bytes(b"\x00" * 13)  # closed segment: not whole entries
    (tmp_path / "00000000000000000020.timeindex").unlink()
    index_files[-1].write_bytes(b"\xff" * 16)  # active segment: entries pointing nowhere
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    assert all_batches(log) == expected
    for offset in range(35):
        assert log.read(offset, 1).first_offset == offset
    assert log.offset_for_timestamp(27).offset == 27
    log.close()
    assert index_files[0].read_bytes() == good_index  # rebuilt identically


def test_corrupt_index_found_lazily_still_answers(tmp_path, make_batch):
    size = len(make_batch())
    config = LogConfig(segment_bytes=10 * size, index_interval_bytes=size)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    fill(log, make_batch, 25)
    log.close()
    # Entries out of order (the cheap open-time check only looks at the last one).
    index = tmp_path / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[0:8], data[8:16] = data[8:16], data[0:8]
    index.write_bytes(bytes(data))
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    assert [log.read(o, 1).first_offset for o in range(10)] == list(range(10))
    log.close()


def test_interrupted_compaction_is_finished_or_dropped(tmp_path, make_batch):
    size = len(make_batch())
    config = LogConfig(segment_bytes=2 * size)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    fill(log, make_batch, 5)
    expected = all_batches(log)
    log.close()
    (tmp_path / "00000000000000000000.log.cleaned").write_bytes(b"half written")
    # A committed swap: the new content of segment 2 is its second batch only.
    (tmp_path / "00000000000000000002.log.swap").write_bytes(expected[3][1])
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    assert not list(tmp_path.glob("*.cleaned")) and not list(tmp_path.glob("*.swap"))
    assert all_batches(log) == expected[:2] + expected[3:]
    assert log.read(2, 1).first_offset == 3  # offset 2 was compacted away
    log.close()


def test_epoch_checkpoint_rebuilt_from_batch_headers(tmp_path, make_batch):
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    for epoch in (1, 1, 4, 6):
        log.append(make_batch(), leader_epoch=epoch, now_ms=0)
    expected = log.epoch_entries()
    log.close()
    (tmp_path / "leader-epoch-checkpoint").write_text("not a checkpoint")
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    assert log.epoch_entries() == expected == [EpochEntry(1, 0), EpochEntry(4, 2), EpochEntry(6, 3)]
    log.close()


def test_log_start_checkpoint_and_lost_tail(tmp_path, make_batch):
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    fill(log, make_batch, 5)
    log.advance_log_start(3)
    log.close()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\n3\n"
    # The data shrank below the checkpointed start (lost unflushed tail): restart at the start.
    os.truncate(tmp_path / "00000000000000000000.log", len(make_batch()) * 2)
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert log.append(make_batch(), leader_epoch=0, now_ms=0).base_offset == 3
    log.close()


def test_disk_full_leaves_the_log_consistent(tmp_path, make_batch, monkeypatch):
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    fill(log, make_batch, 3)
    size_before = log.size_bytes()
    real_pwritev = os.pwritev

    def partial_then_enospc(fd, buffers, offset):
        real_pwritev(fd, [buffers[0]], offset)  # a torn write reaches the file ...
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", partial_then_enospc)
    with pytest.raises(LogStorageError, match="ENOSPC"):
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 3 and log.size_bytes() == size_before
    assert (tmp_path / "00000000000000000000.log").stat().st_size == size_before  # ... and is cut back

    monkeypatch.setattr(os, "pwritev", lambda fd, buffers, offset: real_pwritev(fd, [buffers[0]], offset))
    with pytest.raises(LogStorageError, match="short write"):
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    assert (tmp_path / "00000000000000000000.log").stat().st_size == size_before

    monkeypatch.setattr(os, "pwritev", real_pwritev)
    assert log.append(make_batch(), leader_epoch=0, now_ms=0).base_offset == 3
    log.close()
    assert SegmentedLog.open(tmp_path, LogConfig(), now_ms=0).log_end_offset == 4


def test_read_only_disk_when_even_the_rollback_fails(tmp_path, make_batch, monkeypatch):
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    fill(log, make_batch, 2)
    real_pwritev = os.pwritev

    def torn(fd, buffers, offset):
        real_pwritev(fd, [buffers[0]], offset)
        raise OSError(errno.EROFS, "Read-only file system")

    def no_truncate(fd, length):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "pwritev", torn)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(LogStorageError):
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    monkeypatch.setattr(os, "pwritev", real_pwritev)
    with pytest.raises(LogStorageError, match="reopen"):
        log.append(make_batch(), leader_epoch=0, now_ms=0)  # the segment refuses until recovered
    assert log.read(0, 10**6).next_offset == 2  # reads still serve what is whole
    monkeypatch.undo()
    for segment in log._segments:
        segment.close()
    again = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)  # recovery cuts the torn head
    assert again.log_end_offset == 2
    assert again.append(make_batch(), leader_epoch=0, now_ms=0).base_offset == 2
    again.close()


@pytest.mark.parametrize(
    ("config", "appends", "expected_syncs"),
    [
        (LogConfig(), 10, 0),
        (LogConfig(flush_messages=1), 10, 10),
        (LogConfig(flush_messages=4), 10, 2),
        (LogConfig(flush_ms=100), 10, 3),  # appends at t = 0, 40, ..., 360 -> flushes at 120, 240, 360
    ],
    ids=["page-cache", "every-append", "every-4", "every-100ms"],
)
def test_flush_policy(tmp_path, make_batch, monkeypatch, config, appends, expected_syncs):
    syncs = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd))[1])
    import tinystream.broker.storage.segment as segment_module

    monkeypatch.setattr(segment_module, "_fdatasync", os.fdatasync)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    for i in range(appends):
        log.append(make_batch(), leader_epoch=0, now_ms=i * 40)
    assert len(syncs) == expected_syncs
    log.close()


def test_closed_log_refuses_work(tmp_path, make_batch):
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    log.close()
    with pytest.raises(LogStorageError):
        log.append(make_batch(), leader_epoch=0, now_ms=0)


def test_delete_removes_the_directory(tmp_path, make_batch):
    log = SegmentedLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    fill(log, make_batch, 2)
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_many_segments_lookup_and_read(tmp_path, make_batch):
    size = len(make_batch())
    log = SegmentedLog.open(tmp_path, LogConfig(segment_bytes=5 * size, index_interval_bytes=2 * size), now_ms=0)
    data = b"".join(make_batch() for _ in range(1))
    for _ in range(200):
        log.append(data, leader_epoch=0, now_ms=0)
    assert log.segment_count() == 40
    for offset in range(0, 200, 7):
        base, position = log.locate(offset)
        assert base == offset // 5 * 5 and position == (offset % 5) * size
    memory = MemoryLog(LogConfig(segment_bytes=5 * size))
    for _ in range(200):
        memory.append(data, leader_epoch=0, now_ms=0)
    for offset in range(0, 200, 3):
        for max_bytes in (1, 2 * size, 3 * size + 1, 10**6):
            a, b = log.read(offset, max_bytes), memory.read(offset, max_bytes)
            assert (bytes(a.data), a.first_offset, a.next_offset) == (bytes(b.data), b.first_offset, b.next_offset)
    log.close()


def test_reads_share_buffers_without_copies(tmp_path, make_batch):
    log = SegmentedLog.open(tmp_path, LogConfig(), now_ms=0)
    fill(log, make_batch, 20)
    result = log.read(5, 3 * len(make_batch()))
    assert isinstance(result.data, (bytes, memoryview))
    assert [h.base_offset for _p, h in iter_batches(bytes(result.data), verify=True)] == [5, 6, 7]
    log.close()


def test_results_are_immutable_values(tmp_path, make_batch):
    """append/read results compare and hash by value and cannot be changed by a caller."""
    from tinystream.broker.storage.base import AppendResult, ReadResult

    log = SegmentedLog.open(tmp_path / "log", now_ms=0)
    batch = make_batch(2)
    result = log.append(batch, leader_epoch=0, now_ms=0)
    assert result == AppendResult(0, 1, result.max_timestamp, -1, 0)
    assert hash(result) == hash(AppendResult(0, 1, result.max_timestamp, -1, 0))
    with pytest.raises(AttributeError):
        result.base_offset = 5  # still frozen
    read = log.read(0, 1 << 20)
    assert type(read) is ReadResult
    assert read == ReadResult(read.data, 0, 2, 0, 2)
    assert bytes(read.data)[16:] == bytes(batch)[16:]
    log.close()
