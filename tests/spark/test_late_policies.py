"""Late-event policies (tinystream.spark.late_events) end to end, window by window against the reference.

The events and rounds are those of test_windows.py: round two replays events
late, some inside the watermark (their window is still open) and some beyond it.
`drop` is what test_windows.py checks; here `update` and `side-output`.
"""

from __future__ import annotations

import pytest
from spark_helpers import run_windowed
from test_windows import ROUNDS, ms
from window_reference import late_sessions, late_windows, sessions, windowed, windowed_updates

from tinystream.spark.events import Lateness

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BEYOND = {e.seq for batch in ROUNDS for e in batch if e.lateness is Lateness.LATE_BEYOND}


def written(rows, start="window_start", end="window_end", key="page", count="views", total="revenue_cents"):
    return sorted((ms(r[start]), ms(r[end]), r[key], r[count], r[total]) for r in rows)


def late_seen(rows):
    return {(r["seq"], ms(r["window_start"]), ms(r["window_end"]), ms(r["watermark"])) for r in rows}


def test_update_rewrites_windows_that_late_events_change(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import tumbling_page_counts  # noqa: PLC0415

    rows, _ = run_windowed(spark, broker, tmp_path, topic_name, ROUNDS, tumbling_page_counts, "page", policy="update")
    want = windowed_updates(ROUNDS, size_ms=10_000, delay_ms=5_000, key=lambda e: e.page)
    assert written(rows) == sorted(want)
    # Some window was written in round one and again, grown by late events, in round two.
    versions: dict = {}
    for start, end, page, views, _ in want:
        versions.setdefault((start, end, page), []).append(views)
    assert any(len(v) > 1 and v[-1] > v[0] for v in versions.values())
    # The last write of each closed window is the value the drop policy writes once.
    final = {(s, e, k): (v, t) for s, e, k, v, t in [(ms(r["window_start"]), ms(r["window_end"]), r["page"],
                                                        r["views"], r["revenue_cents"]) for r in rows]}
    closed = windowed(ROUNDS, size_ms=10_000, delay_ms=5_000, key=lambda e: e.page)
    assert {k: final[k] for k in closed} == closed


def test_update_with_sliding_windows(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import sliding_user_counts  # noqa: PLC0415

    rows, _ = run_windowed(spark, broker, tmp_path, topic_name, ROUNDS, sliding_user_counts, "user", policy="update")
    want = windowed_updates(ROUNDS, size_ms=20_000, slide_ms=10_000, delay_ms=5_000, key=lambda e: e.user)
    assert written(rows, key="user", count="events", total="amount_cents") == sorted(want)


def test_side_output_writes_exactly_the_dropped_events(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import fixed_windows, tumbling_page_counts  # noqa: PLC0415

    rows, late = run_windowed(spark, broker, tmp_path, topic_name, ROUNDS, tumbling_page_counts, "page",
                              policy="side-output", assign=lambda ev: fixed_windows(ev, "10 seconds"))
    got = {(ms(r["window_start"]), ms(r["window_end"]), r["page"]): (r["views"], r["revenue_cents"]) for r in rows}
    assert got == windowed(ROUNDS, size_ms=10_000, delay_ms=5_000, key=lambda e: e.page)  # windows as with drop
    want = late_windows(ROUNDS, size_ms=10_000, delay_ms=5_000)
    assert late_seen(late) == want and len(late) == len(want)
    assert {r["seq"] for r in late} == BEYOND  # every event generated beyond the watermark, and only those
    assert all(r["lateness_ms"] == ms(r["watermark"]) - ms(r["event_time"]) > 0 for r in late)


def test_side_output_with_sliding_windows_names_each_missed_window(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import fixed_windows, sliding_user_counts  # noqa: PLC0415

    rows, late = run_windowed(spark, broker, tmp_path, topic_name, ROUNDS, sliding_user_counts, "user",
                              policy="side-output", assign=lambda ev: fixed_windows(ev, "20 seconds", "10 seconds"))
    got = {(ms(r["window_start"]), ms(r["window_end"]), r["user"]): (r["events"], r["amount_cents"]) for r in rows}
    assert got == windowed(ROUNDS, size_ms=20_000, slide_ms=10_000, delay_ms=5_000, key=lambda e: e.user)
    assert late_seen(late) == late_windows(ROUNDS, size_ms=20_000, slide_ms=10_000, delay_ms=5_000)


def test_side_output_with_session_windows(spark, broker, topic_name, tmp_path):
    from tinystream.spark.windows import session_starts, user_sessions  # noqa: PLC0415

    rows, late = run_windowed(spark, broker, tmp_path, topic_name, ROUNDS, user_sessions, "user",
                              policy="side-output", assign=lambda ev: session_starts(ev, "5 seconds"))
    got = {(ms(r["session_start"]), ms(r["session_end"]), r["user"]): (r["events"], r["amount_cents"]) for r in rows}
    assert got == sessions(ROUNDS, gap_ms=5_000, delay_ms=5_000)
    assert late_seen(late) == late_sessions(ROUNDS, gap_ms=5_000, delay_ms=5_000) != set()
