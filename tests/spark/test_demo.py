"""The demo's entry point: produce, window on local Spark, write, read back, report figures."""

from __future__ import annotations

import pytest
from window_reference import windowed

from tinystream.spark.events import generate_rounds

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_run_windowed_demo_reports_what_it_did(spark, broker):
    if not broker.traits.batched_high_watermark:
        pytest.skip(f"{broker.name} miscounts offsets of multi-record batches; the demo produces in batches")
    from tinystream.spark.demo import run_windowed_demo  # noqa: PLC0415

    lines: list[str] = []
    figures = run_windowed_demo(broker.bootstrap, records=500, out=lines.append, spark=spark, seed=3)
    want = windowed(generate_rounds(500, rounds=2, seed=3), size_ms=10_000, delay_ms=5_000, key=lambda e: e.page)
    assert figures["events"] == 501 and figures["rows_read"] == 501  # + the watermark tick
    assert figures["windows"] == len(want)
    assert figures["views"] == sum(v for v, _ in want.values())
    assert figures["late_dropped"] == 500 - figures["views"] and figures["late_beyond"] > 0
    assert any("window (UTC)" in line for line in lines)
