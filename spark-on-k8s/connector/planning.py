"""Offset planning: pure decisions from offsets the broker reported.

Nothing here talks to a broker. The readers fetch metadata and offsets
(`kafka_client.py`), call these functions, and act on what they return:

    resolve_offsets   an OffsetSpec (earliest / latest / JSON / timestamps) -> concrete offsets
    plan_end_offsets  a micro-batch's end: latest offsets, capped by the Trigger.AvailableNow
                      target and by a ReadMaxRows limit split over partitions
    plan_ranges       (start, end) -> one OffsetRange per topic-partition, plus data-loss findings
    split_ranges      minPartitions: split big ranges (Spark's KafkaOffsetRangeCalculator)
    check_read_range  on the executor: a range against the partition's current log start/end

Data loss is never decided here: findings come back as `DataLoss` values and
the caller fails (failOnDataLoss=true) or logs and skips (false), as Spark's
Kafka source does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from tinystream.spark.errors import InvalidOptionError
from tinystream.spark.offsets import EARLIEST, LATEST, OffsetRange, TopicPartition
from tinystream.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    PartitionTimestamps,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    Subscription,
    TimestampStrategy,
)


class Role(Enum):
    STARTING = "starting"
    ENDING = "ending"


class LossReason(Enum):
    OFFSETS_DELETED = "offsets deleted"  # start < log start offset (retention, DeleteRecords)
    OFFSETS_REWOUND = "offsets went backwards"  # end < start: partition truncated or topic re-created
    PARTITION_GONE = "partition gone"  # was in the checkpoint, no longer in metadata
    NEW_PARTITION_TRIMMED = "new partition trimmed"  # a partition added mid-query no longer starts at 0
    RANGE_BEYOND_END = "range beyond log end"  # planned until-offset > log end offset


@dataclass(frozen=True)
class DataLoss:
    tp: TopicPartition
    reason: LossReason
    detail: str

    def message(self) -> str:
        return f"{self.tp}: {self.reason.value}: {self.detail}"


# --- which partitions -------------------------------------------------------


def is_internal(topic: str) -> bool:
    """Kafka's internal topics (__consumer_offsets, __transaction_state) are never subscribed by pattern."""
    return topic.startswith("__")


def select_partitions(subscription: Subscription, partitions_by_topic: Mapping[str, int]) -> tuple[TopicPartition, ...]:
    """The topic-partitions a query reads, from metadata {topic: partition count}."""
    if isinstance(subscription, Assign):
        return subscription.partitions
    if isinstance(subscription, Subscribe):
        topics: Iterable[str] = (t for t in subscription.topics if t in partitions_by_topic)
    elif isinstance(subscription, SubscribePattern):
        topics = (t for t in partitions_by_topic if not is_internal(t) and subscription.matches(t))
    else:  # pragma: no cover - exhaustive
        raise TypeError(subscription)
    return tuple(sorted(TopicPartition(t, p) for t in topics for p in range(partitions_by_topic[t])))


# --- offset specs -----------------------------------------------------------


def timestamps_to_look_up(spec: OffsetSpec, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """The ListOffsets-by-timestamp requests an OffsetSpec needs (empty for plain offsets)."""
    if isinstance(spec, GlobalTimestamp):
        return {tp: spec.timestamp_ms for tp in tps}
    if isinstance(spec, PartitionTimestamps):
        _check_covers(spec.timestamps, tps, "OffsetsByTimestamp")
        return {tp: ts for tp, ts in spec.timestamps.items() if ts >= 0}
    return {}


def _check_covers(given: Mapping[TopicPartition, int], tps: Sequence[TopicPartition], what: str) -> None:
    # Spark: "If startingOffsets contains specific offsets, you must specify all TopicPartitions."
    missing = sorted(set(tps) - set(given))
    unknown = sorted(set(given) - set(tps))
    if missing:
        names = ", ".join(str(tp) for tp in missing)
        raise InvalidOptionError(f"{what} must name every topic-partition the query reads; missing: {names}")
    if unknown:
        names = ", ".join(str(tp) for tp in unknown)
        raise InvalidOptionError(f"{what} names topic-partitions that do not exist: {names}")


def resolve_offsets(
    spec: OffsetSpec,
    tps: Sequence[TopicPartition],
    *,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_timestamp: Mapping[TopicPartition, int | None] | None = None,
    strategy: TimestampStrategy = TimestampStrategy.ERROR,
    role: Role = Role.STARTING,
) -> dict[TopicPartition, int]:
    """Concrete offsets for `tps`. `by_timestamp[tp]` is the broker's answer (None: no such record)."""
    if isinstance(spec, EarliestOffsets):
        return {tp: earliest[tp] for tp in tps}
    if isinstance(spec, LatestOffsets):
        return {tp: latest[tp] for tp in tps}
    if isinstance(spec, SpecificOffsets):
        _check_covers(spec.offsets, tps, f"{role.value}Offsets")
        out = {}
        for tp in tps:
            value = spec.offsets[tp]
            out[tp] = earliest[tp] if value == EARLIEST else latest[tp] if value == LATEST else value
        return out
    if isinstance(spec, GlobalTimestamp | PartitionTimestamps):
        wanted = timestamps_to_look_up(spec, tps)
        found = by_timestamp or {}
        out = {}
        for tp in tps:
            if tp not in wanted:  # -2 / -1 inside startingOffsetsByTimestamp
                value = spec.timestamps[tp]  # type: ignore[union-attr]
                out[tp] = earliest[tp] if value == EARLIEST else latest[tp]
                continue
            offset = found.get(tp)
            if offset is None or offset < 0:
                # No record at or after the timestamp. Ending: read to the end. Starting: the
                # startingOffsetsByTimestampStrategy decides (Spark's default is to fail).
                if role is Role.ENDING or strategy is TimestampStrategy.LATEST:
                    out[tp] = latest[tp]
                    continue
                raise InvalidOptionError(
                    f"no offset of {tp} has a timestamp >= {wanted[tp]}; set "
                    '"startingOffsetsByTimestampStrategy" to "latest" to start at the end instead'
                )
            out[tp] = offset
        return out
    raise TypeError(spec)  # pragma: no cover


# --- micro-batch end --------------------------------------------------------


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], max_offsets: int
) -> dict[TopicPartition, int]:
    """Cap `end` so that at most `max_offsets` offsets are read, split in proportion to backlog.

    Spark's KafkaMicroBatchStream.rateLimit gives each partition limit * size / total,
    rounding shares below one up so that no partition starves; that can read more
    than the limit. ReadMaxRows says "not more than N", so this split is exact:
    shares are floored and the remainder goes to the largest fractions (ties by
    topic-partition order, so the result is deterministic); then a partition with a
    backlog but no share takes one offset from the largest grant, while the limit
    allows one each. The sum is exactly min(max_offsets, total backlog).
    """
    backlog = {tp: end[tp] - start[tp] for tp in sorted(end) if end[tp] - start[tp] > 0}
    total = sum(backlog.values())
    out = dict(end)
    if total <= max_offsets:
        return out
    shares = {tp: max_offsets * size / total for tp, size in backlog.items()}
    grant = {tp: math.floor(share) for tp, share in shares.items()}
    left = max_offsets - sum(grant.values())
    for tp in sorted(backlog, key=lambda t: (-(shares[t] - grant[t]), t))[:left]:
        grant[tp] += 1
    if max_offsets >= len(backlog):
        for tp in sorted((t for t in backlog if grant[t] == 0), key=lambda t: (-backlog[t], t)):
            donor = max(backlog, key=lambda t: (grant[t], -backlog[t]))
            if grant[donor] <= 1:
                break
            grant[donor] -= 1
            grant[tp] = 1
    for tp, granted in grant.items():
        out[tp] = start[tp] + granted
    return out


@dataclass(frozen=True)
class EndPlan:
    end: dict[TopicPartition, int]
    losses: tuple[DataLoss, ...]


def plan_end_offsets(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    earliest_of_new: Mapping[TopicPartition, int],
    max_offsets: int | None = None,
    target: Mapping[TopicPartition, int] | None = None,
) -> EndPlan:
    """The end offset of the next micro-batch.

    `latest` holds every partition the query reads now; partitions that are not in
    `start` are new and read from `earliest_of_new` (Spark: partitions added while a
    query runs are read from earliest). `target` is the Trigger.AvailableNow snapshot:
    nothing beyond it is read, and partitions that appeared after it are left out.
    Partitions in `start` missing from `latest` are reported lost and dropped.
    """
    losses = [
        DataLoss(tp, LossReason.PARTITION_GONE, f"was at offset {start[tp]}, no longer in the topic metadata")
        for tp in sorted(set(start) - set(latest))
    ]
    end: dict[TopicPartition, int] = {}
    base: dict[TopicPartition, int] = {}
    for tp in sorted(latest):
        if tp in start:
            base[tp] = start[tp]
        elif target is not None and tp not in target:
            continue
        else:
            base[tp] = earliest_of_new.get(tp, 0)
        upper = latest[tp]
        if target is not None and tp in target:
            upper = min(upper, target[tp])
        # An end below the base (log rewound) is kept: plan_ranges reports it and the
        # query follows the new log from there.
        end[tp] = upper
    if max_offsets is not None:
        forward = {tp: o for tp, o in end.items() if o >= base[tp]}
        limited = rate_limit({tp: base[tp] for tp in forward}, forward, max_offsets)
        end.update(limited)
    return EndPlan(end=end, losses=tuple(losses))


# --- ranges -----------------------------------------------------------------


@dataclass(frozen=True)
class RangePlan:
    ranges: tuple[OffsetRange, ...]
    losses: tuple[DataLoss, ...]


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    earliest_of_new: Mapping[TopicPartition, int],
) -> RangePlan:
    """One range per topic-partition in `end` (empty ranges left out), plus what was lost."""
    ranges: list[OffsetRange] = []
    losses: list[DataLoss] = []
    for tp in sorted(set(start) - set(end)):
        losses.append(DataLoss(tp, LossReason.PARTITION_GONE, f"was at offset {start[tp]}, not in the end offsets"))
    for tp in sorted(end):
        if tp in start:
            from_offset = start[tp]
        else:
            from_offset = earliest_of_new.get(tp, 0)
            if from_offset != 0:
                losses.append(DataLoss(
                    tp, LossReason.NEW_PARTITION_TRIMMED,
                    f"added partition starts from {from_offset} instead of 0",
                ))
        until = end[tp]
        if until < from_offset:
            losses.append(DataLoss(
                tp, LossReason.OFFSETS_REWOUND,
                f"offset was changed from {from_offset} to {until} (topic re-created or log truncated)",
            ))
            continue
        if until > from_offset:
            ranges.append(OffsetRange(tp, from_offset, until))
    return RangePlan(ranges=tuple(ranges), losses=tuple(losses))


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: split big ranges until there are ~min_partitions.

    Without minPartitions, or when there are already enough ranges, one range per
    topic-partition. Otherwise each range gets round(size / ideal) parts (at least one),
    ideal = total / minPartitions, and the parts are as equal as integer division allows.
    """
    non_empty = [r for r in sorted(ranges) if r.size > 0]
    if min_partitions is None or len(non_empty) >= min_partitions:
        return non_empty
    total = sum(r.size for r in non_empty)
    ideal = total / min_partitions
    out: list[OffsetRange] = []
    for r in non_empty:
        parts = max(math.floor(r.size / ideal + 0.5), 1)  # Scala's math.round (half up)
        remaining = r.size
        begin = r.from_offset
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            stop = min(begin + this, r.until_offset)
            if stop > begin:
                out.append(OffsetRange(r.tp, begin, stop))
            begin = stop
    return out


# --- on the executor ----------------------------------------------------------


@dataclass(frozen=True)
class ReadCheck:
    """The part of a range still readable, or None; and what was lost on the way."""

    range: OffsetRange | None
    losses: tuple[DataLoss, ...]


def check_read_range(r: OffsetRange, *, log_start: int, log_end: int) -> ReadCheck:
    """Compare a planned range with the partition's log start / end offsets right now."""
    losses = []
    begin, until = r.from_offset, r.until_offset
    if begin < log_start:
        losses.append(DataLoss(
            r.tp, LossReason.OFFSETS_DELETED,
            f"cannot fetch offsets {begin} to {min(log_start, until)}: the log now starts at {log_start}",
        ))
        begin = log_start
    if until > log_end:
        losses.append(DataLoss(
            r.tp, LossReason.RANGE_BEYOND_END,
            f"planned to read up to {until} but the log ends at {log_end}",
        ))
        until = log_end
    if until <= begin:
        return ReadCheck(None, tuple(losses))
    return ReadCheck(OffsetRange(r.tp, begin, until), tuple(losses))
