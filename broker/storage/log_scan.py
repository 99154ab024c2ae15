"""Walk a partition log's stored batches in offset order, without decoding them.

For the few places that must look at every batch header of a range: rebuilding
producer state on open, ListOffsets' max timestamp, loading __consumer_offsets
into the group coordinator. Reads go through `PartitionLog.read` in large
chunks, so memory stays bounded whatever the log's size.
"""

from __future__ import annotations

from collections.abc import Iterator

from tinystream.broker.storage.base import OffsetOutOfRangeError, PartitionLog
from tinystream.broker.storage.batch import F_BASE_OFFSET, F_LENGTH, LOG_OVERHEAD, BatchHeader, as_header, iter_header_fields
from tinystream.broker.storage.file_range import FileRange

CHUNK_BYTES = 4 * 1024 * 1024


def scan_batches(
    log: PartitionLog, start: int, end: int | None = None, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, batch bytes) for each batch from the one holding `start`
    up to `end` (exclusive; default the log end offset)."""
    offset = start
    stop = log.log_end_offset if end is None else end
    while offset < stop:
        try:
            result = log.read(offset, chunk_bytes, max_offset=stop, min_one=True)
        except OffsetOutOfRangeError:
            return
        assert not isinstance(result.data, FileRange)  # read without as_range
        data = result.data if isinstance(result.data, memoryview) else memoryview(result.data)
        if not len(data) or result.next_offset <= offset:
            return
        for pos, fields in iter_header_fields(data):
            if fields[F_BASE_OFFSET] >= stop:
                return
            yield as_header(fields), data[pos : pos + fields[F_LENGTH] + LOG_OVERHEAD]
        offset = result.next_offset
