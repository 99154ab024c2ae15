"""A read `as_range` (the sendfile path) names exactly the bytes a copying read returns.

Every offset, several byte budgets (inside one batch, an index interval, past a
segment), with and without a high watermark below the log end, on a log of
mixed batch sizes with a small index interval (so the walk from the index
entry near the end is taken).
"""

from __future__ import annotations

import os

import pytest

from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.file_range import FileRange
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
    os.unlink(ranged.data.file.name)
    assert ranged.data.read() == expected
    ranged.data.close()
    assert ranged.data.closed
