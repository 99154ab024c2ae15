"""Windowed pipelines end to end (topic -> windows -> topic) against a plain-Python reference.

Events come in two rounds; the second replays some events late, inside and
beyond the watermark. Each round is one Trigger.AvailableNow run from the
same checkpoint, so the second round meets the watermark the first left.
"""

from __future__ import annotations

import datetime as dt

import pytest
from spark_helpers import run_windowed
from window_reference import sessions, windowed

from tinystream.spark.events import Lateness, generate_rounds

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROUNDS = generate_rounds(600, rounds=2, seed=11, late_fraction=0.15)
COUNTRY = {"u0": "NL", "u1": "NL", "u2": "DE", "u3": "FR", "u4": "DE"}  # u5 has no row: "unknown"


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def run_pipeline(spark, broker, tmp_path, topic, build, key_column):
    return run_windowed(spark, broker, tmp_path, topic, ROUNDS, build, key_column)[0]


def test_generator_has_late_events_both_sides_of_the_watermark():
    kinds = {e.lateness for batch in ROUNDS for e in batch}
    assert {Lateness.LATE_INSIDE, Lateness.LATE_BEYOND, Lateness.ON_TIME} <= kinds


def test_tumbling_windows_match_the_reference(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import tumbling_page_counts  # noqa: PLC0415

    rows = run_pipeline(spark, broker, tmp_path, topic_name, tumbling_page_counts, "page")
    got = {(ms(r["window_start"]), ms(r["window_end"]), r["page"]): (r["views"], r["revenue_cents"]) for r in rows}
    want = windowed(ROUNDS, size_ms=10_000, delay_ms=5_000, key=lambda e: e.page)
    assert got == want
    beyond = sum(1 for b in ROUNDS for e in b if e.lateness is Lateness.LATE_BEYOND)
    real = sum(1 for b in ROUNDS for e in b if e.lateness is not Lateness.TICK)
    assert sum(v for v, _ in got.values()) == real - beyond  # late inside counted, beyond dropped


def test_sliding_windows_match_the_reference(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import sliding_user_counts  # noqa: PLC0415

    rows = run_pipeline(spark, broker, tmp_path, topic_name, sliding_user_counts, "user")
    got = {(ms(r["window_start"]), ms(r["window_end"]), r["user"]): (r["events"], r["amount_cents"]) for r in rows}
    assert got == windowed(ROUNDS, size_ms=20_000, slide_ms=10_000, delay_ms=5_000, key=lambda e: e.user)


def test_session_windows_match_the_reference(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import user_sessions  # noqa: PLC0415

    rows = run_pipeline(spark, broker, tmp_path, topic_name, user_sessions, "user")
    got = {(ms(r["session_start"]), ms(r["session_end"]), r["user"]): (r["events"], r["amount_cents"]) for r in rows}
    assert got == sessions(ROUNDS, gap_ms=5_000, delay_ms=5_000)


def test_stream_static_join_matches_the_reference(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import revenue_by_country  # noqa: PLC0415

    users = spark.createDataFrame(sorted(COUNTRY.items()), "user string, country string")
    rows = run_pipeline(spark, broker, tmp_path, topic_name, lambda ev: revenue_by_country(ev, users), "country")
    got = {(ms(r["window_start"]), ms(r["window_end"]), r["country"]): (r["orders"], r["revenue_cents"]) for r in rows}
    assert got == windowed(ROUNDS, size_ms=10_000, delay_ms=5_000, key=lambda e: COUNTRY.get(e.user, "unknown"))
