"""Offsets as deterministic JSON (what Spark keeps in the checkpoint and compares as text)."""

from __future__ import annotations

import json
import random

import pytest

from tinystream.spark.errors import InvalidOptionError
from tinystream.spark.offsets import (
    OffsetRange,
    TopicPartition,
    assignment_from_json,
    canonical_json,
    offsets_from_json,
    offsets_to_json,
)

pytestmark = pytest.mark.spark

TP = TopicPartition


def test_layout_is_sparks_kafka_source():
    assert offsets_to_json({TP("events", 0): 23, TP("events", 1): 17}) == {"events": {"0": 23, "1": 17}}


def test_same_offsets_give_the_same_text_whatever_the_insertion_order():
    items = [(TP(t, p), p * 10 + len(t)) for t in ("b", "a", "c") for p in (10, 2, 0, 1)]
    texts = set()
    for seed in range(20):
        random.Random(seed).shuffle(items)
        texts.add(canonical_json(dict(items)))
    assert len(texts) == 1


def test_partitions_sort_by_number_not_by_text():
    text = canonical_json({TP("t", 10): 1, TP("t", 2): 1, TP("t", 1): 1})
    assert text == '{"t": {"1": 1, "2": 1, "10": 1}}'


def test_round_trip_through_json_text():
    offsets = {TP("a", 0): 5, TP("a", 3): 0, TP("b.c-d_e", 1): 2**40}
    assert offsets_from_json(json.dumps(offsets_to_json(offsets))) == offsets
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


@pytest.mark.parametrize("bad", ['{"t": {"x": 1}}', '{"t": {"0": "1"}}', '{"t": [0]}', '[1]', '{"t": {"0": true}}'])
def test_malformed_offsets_are_refused(bad):
    with pytest.raises(InvalidOptionError):
        offsets_from_json(bad)


def test_assign_parses_and_sorts():
    assert assignment_from_json('{"b": [1, 0], "a": [2]}') == (TP("a", 2), TP("b", 0), TP("b", 1))


@pytest.mark.parametrize("bad", ["{}", "[]", '{"a": [-1]}', '{"a": "0"}', "not json"])
def test_assign_refuses_bad_json(bad):
    with pytest.raises(InvalidOptionError, match="assign"):
        assignment_from_json(bad)


def test_range_size_never_negative():
    assert OffsetRange(TP("t", 0), 5, 3).size == 0
    assert OffsetRange(TP("t", 0), 3, 5).size == 2
