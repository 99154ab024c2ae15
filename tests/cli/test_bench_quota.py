"""`tinystream bench quota`: the per-second buckets and figures from fixed input, then a short real run."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tinystream.bench.quota_bench import (
    MIB,
    QuotaRun,
    burst_starts,
    per_second,
    quota_bench_command,
    whole_periods,
    write_picture,
)


def test_acknowledged_bytes_land_in_the_second_they_were_acknowledged() -> None:
    events = [(100.2, 10), (100.9, 5), (101.0, 7), (102.5, 1), (99.9, 1000), (103.0, 1000)]
    assert per_second(events, start=100.0, seconds=3) == (15, 7, 1)  # before the start and after the end: dropped


def test_the_averages_cover_whole_periods_of_the_sawtooth() -> None:
    series = [9, 0, 1, 0, 5, 6, 0, 1, 8, 1]  # bursts (over 2 x quota 2) start at seconds 0, 4 and 8
    assert burst_starts(series, threshold=4) == [0, 4, 8]
    assert whole_periods(series, quota=2) == 8  # up to the last burst's start
    assert whole_periods([9, 0, 1, 1], quota=2) == 4  # one burst: the whole run


def _run() -> QuotaRun:
    return QuotaRun(target="tinystream", quota=MIB, free_rate=3 * MIB,
                    throttled=(5 * MIB, 0, 0, 0, 0, 4 * MIB, MIB // 2, 0),
                    unthrottled=(3 * MIB,) * 7 + (2 * MIB,))


def test_the_ratios_are_to_the_quota_and_to_the_unthrottled_clients_own_pace() -> None:
    run = _run()
    assert run.span == 5
    assert run.throttled_rate == MIB and run.throttled_ratio == 1.0
    assert run.unthrottled_ratio == 1.0  # the last second (outside the whole periods) is not counted
    lines = run.lines()
    assert lines[0].split() == ["second", "throttled", "MiB/s", "unthrottled", "MiB/s"]
    assert len(lines) == 1 + 8 + 2 and lines[1].split() == ["1", "5.00", "3.00"]
    assert "= 1.000 x the quota" in lines[9] and "over seconds 1-5 (whole periods)" in lines[9]
    assert "whole run 1.188 MiB/s" in lines[9]
    assert "= 1.000 x what it asked" in lines[10]


def test_the_picture_is_written_from_a_fixed_run(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    path = write_picture(_run(), tmp_path / "pictures" / "quota.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_short_run_holds_the_throttled_client_below_the_unthrottled_one(tmp_path) -> None:
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("matplotlib")
    picture = tmp_path / "quota.png"
    result = CliRunner().invoke(quota_bench_command, [
        "--seconds", "6", "--quota", "131072", "--free-rate", str(2 * MIB),
        "--picture", str(picture), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["throttled"]) == len(report["unthrottled"]) == 6
    assert report["quota"] == 131072 and report["picture"] == str(picture) and picture.is_file()
    assert sum(report["unthrottled"]) > 0
    assert report["throttled_rate"] < report["unthrottled_rate"]
