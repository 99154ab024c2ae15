"""The transactional produce benchmark's summary: medians, spreads and per-round ratios (no brokers)."""

from __future__ import annotations

import pytest

from tinystream.bench.stats import RunResult
from tinystream.bench.txn_rounds import Cell, summarize


def cell(target: str, round_no: int, txn: int, records_per_s: float) -> Cell:
    result = RunResult(target=target, bootstrap="-", client="confluent", operation="produce", records=1000,
                       bytes=0, seconds=1000 / records_per_s, latency_ms={}, latency_unit="record")
    return Cell(target, round_no, txn, result)


def test_ratios_are_taken_per_round_then_summarised():
    cells = [
        cell("tinystream", 1, 0, 1000), cell("tinystream", 1, 100, 500), cell("kafka", 1, 0, 2000),
        cell("kafka", 1, 100, 2000),
        cell("tinystream", 2, 0, 2000), cell("tinystream", 2, 100, 600), cell("kafka", 2, 0, 2000),
        cell("kafka", 2, 100, 1000),
        cell("tinystream", 3, 0, 1500), cell("tinystream", 3, 100, 300),  # kafka's round 3 failed
    ]
    s = summarize(cells, ["tinystream", "kafka"], [100])
    assert s["records_per_s"]["tinystream idempotent"] == pytest.approx({"median": 1500, "min": 1000, "max": 2000,
                                                                         "n": 3})
    assert s["txn_over_idempotent"]["tinystream txn 100"]["median"] == pytest.approx(0.3)  # 0.5, 0.3, 0.2
    assert s["txn_over_idempotent"]["kafka txn 100"] == pytest.approx({"median": 0.75, "min": 0.5, "max": 1.0,
                                                                       "n": 2})
    # ours / kafka only where both ran in the same round
    assert s["ours_over_peer"]["txn 100 vs kafka"] == pytest.approx({"median": 0.425, "min": 0.25, "max": 0.6, "n": 2})
    assert s["ours_over_peer"]["idempotent vs kafka"]["n"] == 2
