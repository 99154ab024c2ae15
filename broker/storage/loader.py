"""LogLoader: open a partition directory and recover it (Kafka's LogLoader).

Recovery, in order:
1. compaction leftovers: uncommitted output dropped, committed swaps
   finished (compaction_swap.recover); index files without a segment dropped;
2. closed segments get Kafka's cheap index sanity check, and a rebuild when
   it fails (corrupt bytes found by the rebuild are cut and logged);
3. the active segment is scanned from its last index entry and a torn or
   corrupt tail is cut off;
4. the log start offset is the checkpoint's (it may lie below the first
   segment after compaction removed emptied segments), else the first
   segment's base; a checkpoint past the recovered end means an unflushed
   tail was lost: the log restarts empty at the promised start rather than
   reuse offsets;
5. the leader-epoch cache is read from its checkpoint (rebuilt from batch
   headers when missing or corrupt) and cut to [start, end].
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tinystream.broker.storage import compaction_swap
from tinystream.broker.storage.base import LogConfig, LogStorageError
from tinystream.broker.storage.batch import F_BASE_OFFSET, F_LEADER_EPOCH
from tinystream.broker.storage.checkpoint import CheckpointFormatError, OffsetCheckpoint
from tinystream.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache, LeaderEpochCheckpoint
from tinystream.broker.storage.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, parse_segment_file_name

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """A recovered partition directory, ready for a SegmentedLog."""

    directory: Path
    segments: list[LogSegment]
    log_start_offset: int
    epochs: LeaderEpochCache
    start_checkpoint: OffsetCheckpoint


def load(directory: Path, config: LogConfig, *, now_ms: int) -> LoadedLog:
    """Open (or create) the partition directory and recover it; see the module docstring."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LogStorageError(f"cannot create {directory}: {exc.strerror or exc}") from exc
    compaction_swap.recover(directory)
    bases = sorted(b for b in (parse_segment_file_name(p.name) for p in directory.iterdir()) if b is not None)
    _delete_orphan_indexes(directory, set(bases))
    start_checkpoint = OffsetCheckpoint(directory / LOG_START_CHECKPOINT)
    checkpointed_start = start_checkpoint.read()
    segments = _load_segments(directory, bases, config, checkpointed_start=checkpointed_start, now_ms=now_ms)
    end = segments[-1].next_offset
    start = segments[0].base_offset if checkpointed_start is None else checkpointed_start
    if start > end:
        _log.warning("%s: log start %d is past the recovered end %d; restarting at %d", directory, start, end, start)
        for segment in segments:
            segment.delete()
        segments = [LogSegment.create(directory, start, index_interval_bytes=config.index_interval_bytes, now_ms=now_ms)]
        end = start
    epochs = _load_epochs(directory, segments)
    # Entries past the recovered end are gone with the data; one starting
    # exactly at the end is legitimate (the log start moved there).
    epochs.truncate_from_end(max(end, start) + 1)
    epochs.truncate_from_start(start)
    if checkpointed_start != start:
        start_checkpoint.write(start)
    return LoadedLog(directory, segments, start, epochs, start_checkpoint)


def _load_segments(
    directory: Path, bases: list[int], config: LogConfig, *, checkpointed_start: int | None, now_ms: int
) -> list[LogSegment]:
    interval = config.index_interval_bytes
    segments: list[LogSegment] = []
    try:
        for base in bases[:-1]:
            segment = LogSegment.load(directory, base, index_interval_bytes=interval, now_ms=now_ms)
            segments.append(segment)
            if not segment.indexes_look_sane():
                _log.warning("%s: rebuilding indexes of segment %d", directory, base)
                cut = segment.rebuild_indexes()
                if cut:
                    _log.error("%s: closed segment %d had %d corrupt bytes, cut", directory, base, cut)
                segment.seal()
        if bases:
            active = LogSegment.load(directory, bases[-1], index_interval_bytes=interval, now_ms=now_ms)
            segments.append(active)
            cut = active.recover()
            if cut:
                _log.warning("%s: cut %d bytes of torn or corrupt tail from segment %d", directory, cut, bases[-1])
            active.rolling_base_ms = active.first_batch_rolling_base(now_ms)
        else:
            first = checkpointed_start or 0
            segments.append(LogSegment.create(directory, first, index_interval_bytes=interval, now_ms=now_ms))
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments


def _delete_orphan_indexes(directory: Path, bases: set[int]) -> None:
    for path in directory.iterdir():
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if path.name.endswith(suffix) and len(path.name) == 20 + len(suffix):
                try:
                    base = int(path.name[:20])
                except ValueError:
                    continue
                if base not in bases:
                    path.unlink(missing_ok=True)


def _load_epochs(directory: Path, segments: list[LogSegment]) -> LeaderEpochCache:
    """The epoch checkpoint, or (missing or corrupt) a rebuild from batch headers."""
    checkpoint = LeaderEpochCheckpoint(directory / LEADER_EPOCH_CHECKPOINT)
    try:
        entries = checkpoint.read()
    except CheckpointFormatError as exc:
        _log.warning("%s: leader-epoch checkpoint unreadable (%s); rebuilding from batch headers", directory, exc)
        entries = None
    if entries is not None:
        return LeaderEpochCache(entries, checkpoint=checkpoint)
    cache = LeaderEpochCache()
    for segment in segments:
        for fields, _data in segment.iter_batches():
            if fields[F_LEADER_EPOCH] > cache.latest_epoch:
                cache.assign(fields[F_LEADER_EPOCH], fields[F_BASE_OFFSET])
    checkpoint.write(cache.entries())
    return LeaderEpochCache(cache.entries(), checkpoint=checkpoint)
