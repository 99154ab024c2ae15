"""Offset planning without a broker: range splitting, rate limits, new and lost partitions."""

from __future__ import annotations

import random

import pytest

from tinystream.spark.errors import InvalidOptionError
from tinystream.spark.offsets import OffsetRange, TopicPartition
from tinystream.spark.options import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    PartitionTimestamps,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    TimestampStrategy,
)
from tinystream.spark.planning import (
    LossReason,
    Role,
    check_read_range,
    plan_end_offsets,
    plan_ranges,
    rate_limit,
    resolve_offsets,
    select_partitions,
    split_ranges,
)

pytestmark = pytest.mark.spark

A0, A1, A2, B0 = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2), TopicPartition("b", 0))


# --- partitions -----------------------------------------------------------------


def test_subscribe_ignores_missing_topics_and_pattern_skips_internal():
    meta = {"a": 2, "b": 1, "__consumer_offsets": 50, "ab": 1}
    assert select_partitions(Subscribe(("a", "zz")), meta) == (TopicPartition("a", 0), TopicPartition("a", 1))
    assert select_partitions(SubscribePattern("a.*"), meta) == (A0, A1, TopicPartition("ab", 0))
    assert select_partitions(SubscribePattern(".*"), meta)[-1] == B0  # no __consumer_offsets


# --- minPartitions ----------------------------------------------------------------


def test_one_range_per_partition_without_min_partitions():
    ranges = [OffsetRange(A1, 0, 10), OffsetRange(A0, 5, 5), OffsetRange(A0, 0, 3)]
    assert split_ranges(ranges, None) == [OffsetRange(A0, 0, 3), OffsetRange(A1, 0, 10)]  # empty dropped


def test_enough_ranges_are_not_split():
    ranges = [OffsetRange(A0, 0, 1000), OffsetRange(A1, 0, 1)]
    assert split_ranges(ranges, 2) == ranges


def test_big_ranges_split_in_proportion_like_spark():
    # ideal = 10001 / 3: the small range keeps one part, the big one gets round(2.9997) = 3.
    out = split_ranges([OffsetRange(A0, 0, 1), OffsetRange(A1, 0, 10000)], 3)
    assert out == [OffsetRange(A0, 0, 1), OffsetRange(A1, 0, 3333), OffsetRange(A1, 3333, 6666),
                   OffsetRange(A1, 6666, 10000)]
    out = split_ranges([OffsetRange(A0, 0, 2)], 4)
    assert out == [OffsetRange(A0, 0, 1), OffsetRange(A0, 1, 2)]  # no empty parts
    out = split_ranges([OffsetRange(A0, 100, 110)], 3)
    assert [r.size for r in out] == [3, 3, 4]


@pytest.mark.parametrize("seed", range(30))
def test_split_covers_every_offset_exactly_once(seed):
    rng = random.Random(seed)
    ranges = [OffsetRange(TopicPartition("t", p), s, s + rng.randint(0, 500))
              for p in range(rng.randint(1, 6)) for s in [rng.randint(0, 1000)]]
    out = split_ranges(ranges, rng.randint(1, 20))
    for r in ranges:
        parts = sorted((x for x in out if x.tp == r.tp), key=lambda x: x.from_offset)
        covered = [o for x in parts for o in range(x.from_offset, x.until_offset)]
        assert covered == list(range(r.from_offset, r.until_offset))


# --- maxOffsetsPerTrigger -----------------------------------------------------------


def test_rate_limit_splits_in_proportion_to_backlog():
    start = {A0: 0, A1: 0, A2: 0}
    end = {A0: 600, A1: 300, A2: 100}
    limited = rate_limit(start, end, 100)
    assert limited == {A0: 60, A1: 30, A2: 10}


def test_rate_limit_no_op_when_under_limit():
    assert rate_limit({A0: 5}, {A0: 10}, 100) == {A0: 10}


def test_rate_limit_does_not_starve_small_partitions():
    limited = rate_limit({A0: 0, A1: 0}, {A0: 10_000, A1: 3}, 100)
    assert limited[A1] >= 1 and sum(limited.values()) == 100


@pytest.mark.parametrize("seed", range(50))
def test_rate_limit_never_exceeds_the_limit_nor_the_end(seed):
    rng = random.Random(seed)
    tps = [TopicPartition("t", p) for p in range(rng.randint(1, 8))]
    start = {tp: rng.randint(0, 100) for tp in tps}
    end = {tp: start[tp] + rng.choice([0, rng.randint(0, 1000)]) for tp in tps}
    limit = rng.randint(1, 600)
    limited = rate_limit(start, end, limit)
    read = sum(limited[tp] - start[tp] for tp in tps)
    assert read == min(limit, sum(end[tp] - start[tp] for tp in tps))
    assert all(start[tp] <= limited[tp] <= end[tp] for tp in tps)


def test_rate_limit_is_deterministic():
    start = {TopicPartition("t", p): 0 for p in range(7)}
    end = {tp: 33 for tp in start}
    assert len({tuple(sorted(rate_limit(start, end, 10).items())) for _ in range(5)}) == 1


# --- micro-batch end ------------------------------------------------------------


def test_end_offsets_take_latest_and_new_partitions_from_earliest():
    plan = plan_end_offsets({A0: 5}, {A0: 9, A1: 4}, earliest_of_new={A1: 0})
    assert plan.end == {A0: 9, A1: 4} and plan.losses == ()


def test_end_offsets_respect_the_limit_counting_new_partitions_from_earliest():
    plan = plan_end_offsets({A0: 0}, {A0: 100, A1: 100}, earliest_of_new={A1: 0}, max_offsets=10)
    assert plan.end == {A0: 5, A1: 5}


def test_available_now_target_caps_and_excludes_later_partitions():
    plan = plan_end_offsets({A0: 0}, {A0: 50, A1: 7}, earliest_of_new={A1: 0}, target={A0: 20})
    assert plan.end == {A0: 20}
    # Once the target is reached, the end equals the start: no more batches.
    assert plan_end_offsets({A0: 20}, {A0: 50, A1: 7}, earliest_of_new={A1: 0}, target={A0: 20}).end == {A0: 20}


def test_gone_partition_is_reported_and_dropped():
    plan = plan_end_offsets({A0: 5, B0: 3}, {A0: 6}, earliest_of_new={})
    assert plan.end == {A0: 6}
    assert [loss.reason for loss in plan.losses] == [LossReason.PARTITION_GONE]


# --- ranges ----------------------------------------------------------------------


def test_ranges_one_per_partition_and_rewind_is_a_loss():
    plan = plan_ranges({A0: 5, A1: 10}, {A0: 8, A1: 2, A2: 3}, earliest_of_new={A2: 0})
    assert plan.ranges == (OffsetRange(A0, 5, 8), OffsetRange(A2, 0, 3))
    assert [loss.reason for loss in plan.losses] == [LossReason.OFFSETS_REWOUND]


def test_new_partition_not_starting_at_zero_is_a_loss():
    plan = plan_ranges({}, {A0: 10}, earliest_of_new={A0: 4})
    assert plan.ranges == (OffsetRange(A0, 4, 10),)
    assert plan.losses[0].reason is LossReason.NEW_PARTITION_TRIMMED


def test_read_check_trims_deleted_offsets_and_reports_them():
    r = OffsetRange(A0, 10, 50)
    assert check_read_range(r, log_start=0, log_end=60).range == r
    check = check_read_range(r, log_start=30, log_end=60)
    assert check.range == OffsetRange(A0, 30, 50)
    assert check.losses[0].reason is LossReason.OFFSETS_DELETED
    gone = check_read_range(r, log_start=70, log_end=80)
    assert gone.range is None
    short = check_read_range(r, log_start=0, log_end=40)
    assert short.range == OffsetRange(A0, 10, 40) and short.losses[0].reason is LossReason.RANGE_BEYOND_END


# --- starting / ending offsets ------------------------------------------------------


EARLIEST = {A0: 2, A1: 0}
LATEST = {A0: 20, A1: 30}


def test_resolve_plain_specs():
    assert resolve_offsets(EarliestOffsets(), [A0, A1], earliest=EARLIEST, latest=LATEST) == EARLIEST
    assert resolve_offsets(LatestOffsets(), [A0, A1], earliest=EARLIEST, latest=LATEST) == LATEST
    spec = SpecificOffsets({A0: -2, A1: 7})
    assert resolve_offsets(spec, [A0, A1], earliest=EARLIEST, latest=LATEST) == {A0: 2, A1: 7}
    spec = SpecificOffsets({A0: -1, A1: 7})
    assert resolve_offsets(spec, [A0, A1], earliest=EARLIEST, latest=LATEST, role=Role.ENDING) == {A0: 20, A1: 7}


def test_specific_offsets_must_name_every_partition():
    with pytest.raises(InvalidOptionError, match="missing: a-1"):
        resolve_offsets(SpecificOffsets({A0: 1}), [A0, A1], earliest=EARLIEST, latest=LATEST)
    with pytest.raises(InvalidOptionError, match="do not exist: b-0"):
        resolve_offsets(SpecificOffsets({A0: 1, A1: 1, B0: 1}), [A0, A1], earliest=EARLIEST, latest=LATEST)


def test_timestamps_resolve_with_strategy():
    spec = GlobalTimestamp(1000)
    found = {A0: 5, A1: None}
    with pytest.raises(InvalidOptionError, match="startingOffsetsByTimestampStrategy"):
        resolve_offsets(spec, [A0, A1], earliest=EARLIEST, latest=LATEST, by_timestamp=found)
    out = resolve_offsets(spec, [A0, A1], earliest=EARLIEST, latest=LATEST, by_timestamp=found,
                          strategy=TimestampStrategy.LATEST)
    assert out == {A0: 5, A1: 30}
    ending = resolve_offsets(spec, [A0, A1], earliest=EARLIEST, latest=LATEST, by_timestamp=found, role=Role.ENDING)
    assert ending == {A0: 5, A1: 30}
    per = PartitionTimestamps({A0: -2, A1: 1000})
    assert resolve_offsets(per, [A0, A1], earliest=EARLIEST, latest=LATEST, by_timestamp={A1: 9}) == {A0: 2, A1: 9}
