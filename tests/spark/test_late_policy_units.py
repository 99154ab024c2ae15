"""The pure parts of the late-events side output: Spark's offset log and a batch's offset range."""

from __future__ import annotations

import json

import pytest

from tinystream.spark.late_events import BatchLog, LatePolicy, batch_range, parse_offset_log


def entry(watermark: int, offsets) -> str:
    meta = {"batchWatermarkMs": watermark, "batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": "2"}}
    return "v1\n" + json.dumps(meta) + "\n" + json.dumps(offsets)


def test_an_offset_log_entry_gives_the_watermark_and_the_end_offsets():
    log = parse_offset_log(entry(1234, {"events": {"0": 5, "1": 7}}))
    assert log == BatchLog(1234, {"events": {"0": 5, "1": 7}})


def test_a_batch_reads_from_the_previous_end_and_new_partitions_from_earliest():
    start, end = batch_range(BatchLog(0, {"events": {"0": 5}}), BatchLog(9, {"events": {"0": 8, "1": 3}}))
    assert start == {"events": {"0": 5, "1": -2}} and end == {"events": {"0": 8, "1": 3}}


@pytest.mark.parametrize("text", ["", "v1\n{}", "v1\n{}\n{}\n{}"])
def test_entries_that_are_not_one_source_are_refused(text):
    with pytest.raises(ValueError):
        parse_offset_log(text)


def test_policies_map_to_output_modes():
    assert [p.output_mode for p in LatePolicy] == ["append", "update", "append"]
    assert LatePolicy("side-output") is LatePolicy.SIDE_OUTPUT
