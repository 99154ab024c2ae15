"""A read `as_range` (the sendfile path) names exactly the bytes a copying read returns, and opens no file.

Every offset, several byte budgets (inside one batch, an index interval, past a
segment), with and without a high watermark below the log end, on a log of
mixed batch sizes with a small index interval (so the walk from the index
entry near the end is taken).

A range shares its segment's descriptor (file_range.py): real files, the
process's own descriptor table (/proc/self/fd) and os.fstat say when it is
open and closed, while the segment is closed, deleted, replaced or cut.
"""

from __future__ import annotations

import errno
import os

import pytest

from tinystream.broker.storage.base import LogConfig, LogStorageError
from tinystream.broker.storage.file_range import FileRange, ranges_held
from tinystream.broker.storage.segmented import SegmentedLog


@pytest.fixture
def log(tmp_path, make_batch):
    config = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256)
    with SegmentedLog.open(tmp_path, config, now_ms=0) as opened:
        for i in range(120):
            opened.append(make_batch(1 + i % 5, value_size=10 + (i * 37) % 300, timestamp=i), leader_epoch=0,
                          now_ms=i)
        yield opened


@pytest.mark.parametrize("max_bytes", [1, 100, 700, 3000, 1 << 20])
@pytest.mark.parametrize("limit", [None, "middle"])
def test_a_range_reads_back_as_the_copying_read(log, max_bytes, limit):
    end = log.log_end_offset
    max_offset = None if limit is None else end // 2
    for offset in range(0, end):
        copied = log.read(offset, max_bytes, max_offset=max_offset, min_one=True)
        ranged = log.read(offset, max_bytes, max_offset=max_offset, min_one=True, as_range=True)
        assert (ranged.first_offset, ranged.next_offset) == (copied.first_offset, copied.next_offset)
        if isinstance(ranged.data, FileRange):
            try:
                assert ranged.data.read() == bytes(copied.data)
                assert len(ranged.data) == len(copied.data) > 0
            finally:
                ranged.data.close()
        else:
            assert ranged.data == copied.data == b""


def test_a_range_outlives_its_segment_file(log, tmp_path):
    """Retention may delete the segment after the range was taken: its own open file still reads."""
    ranged = log.read(0, 1 << 20, as_range=True)
    expected = bytes(log.read(0, 1 << 20).data)
    assert isinstance(ranged.data, FileRange)
    os.unlink(ranged.data.path)
    assert ranged.data.read() == expected
    ranged.data.close()
    assert ranged.data.closed


def open_fds() -> set[int]:
    """This process's open descriptors (less the one listdir used to list them, closed by now)."""
    listed = [int(fd) for fd in os.listdir("/proc/self/fd")]
    return {fd for fd in listed if os.path.lexists(f"/proc/self/fd/{fd}")}


def assert_closed(fd: int) -> None:
    with pytest.raises(OSError) as raised:
        os.fstat(fd)
    assert raised.value.errno == errno.EBADF


def first_segment_range(log: SegmentedLog) -> tuple[FileRange, bytes]:
    """A range over the first segment's batches, and the bytes a copying read gives for them."""
    ranged = log.read(0, 1 << 20, as_range=True)
    assert isinstance(ranged.data, FileRange)
    assert log.segment_count() > 2 and ranged.next_offset < log.log_end_offset  # the first segment only
    return ranged.data, bytes(log.read(0, 1 << 20).data)


def test_a_range_shares_its_segment_descriptor_and_opens_none(log):
    before = open_fds()
    held = ranges_held()
    ranges = [log.read(offset, 1 << 20, as_range=True).data for offset in range(log.log_end_offset) for _ in range(3)]
    try:
        assert all(isinstance(r, FileRange) for r in ranges)
        assert open_fds() == before  # ~360 ranges over the log's segments, not one descriptor more
        assert ranges_held() == held + len(ranges)
        assert {r.fileno() for r in ranges} <= before
    finally:
        for r in ranges:
            r.close()
    assert ranges_held() == held and open_fds() == before


def test_a_deleted_segment_stays_readable_until_its_last_range_closes(log):
    """Retention deletes the segment (closes and unlinks it) while two ranges wait: both still read the old
    bytes, and the descriptor closes with the second one, not with the segment."""
    first, expected = first_segment_range(log)
    second = log.read(0, 1 << 20, as_range=True).data
    assert isinstance(second, FileRange)
    fd, path = first.fileno(), first.path
    log.advance_log_start(log.read(0, 1 << 20).next_offset)  # the first segment goes
    assert path is not None and not path.exists()
    assert os.fstat(fd).st_nlink == 0  # unlinked, still open
    assert first.read() == second.read() == expected
    first.close()
    first.close()  # idempotent: the second range's hold is not let go twice
    assert second.read() == expected and os.fstat(fd).st_nlink == 0
    second.close()
    assert_closed(fd)
    assert first.closed and second.closed


def test_a_closed_log_leaves_the_descriptor_to_its_ranges(log):
    ranged, expected = first_segment_range(log)
    fd = ranged.fileno()
    log.close()
    assert ranged.read() == expected
    ranged.close()
    assert_closed(fd)


def test_a_compacted_segment_range_sends_the_bytes_it_was_taken_on(log):
    """Compaction renames new bytes over the segment's file: a range taken before reads the old ones."""
    ranged, expected = first_segment_range(log)
    kept = [bytes(b) for b in log.segment_batches(0)][:2]
    assert log.replace_segment(0, kept)
    assert bytes(log.read(0, 1 << 20).data) == b"".join(kept) != expected
    assert ranged.read() == expected
    fd = ranged.fileno()
    ranged.close()
    assert_closed(fd)


def test_a_truncation_cuts_the_file_a_range_reads(log):
    """A truncation cuts the same file (the active segment's): the range reads short, which the writer
    turns into a failed connection (response_writer.py), as with a descriptor of its own before."""
    end = log.log_end_offset
    ranged = log.read(end - 3, 1 << 20, as_range=True).data
    assert isinstance(ranged, FileRange)
    log.truncate_to(end - 3)
    assert len(ranged.read()) < len(ranged)
    ranged.close()


def test_a_range_dropped_without_close_lets_go_when_collected(log):
    ranged, _ = first_segment_range(log)
    fd = ranged.fileno()
    held = ranges_held()
    log.advance_log_start(log.read(0, 1 << 20).next_offset)
    del ranged  # the safety net: __del__ releases its hold, once
    assert ranges_held() == held - 1
    assert_closed(fd)


def test_a_read_of_a_closed_segment_is_a_storage_error(log):
    segment = log._segments.at(0)  # what a reader racing the log's close would meet
    log.close()
    with pytest.raises(LogStorageError):
        segment.records.slice(0, 10)


def test_a_range_over_a_file_of_its_own(tmp_path):
    path = tmp_path / "f.log"
    path.write_bytes(bytes(range(200)))
    before = open_fds()
    ranged = FileRange.open(path, 100, 50)
    assert open_fds() == before | {ranged.fileno()}
    assert ranged.read() == bytes(range(100, 150))
    ranged.close()
    assert open_fds() == before
    with pytest.raises(ValueError):
        ranged.fileno()
