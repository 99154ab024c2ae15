"""The storage benchmark runs end to end on small sizes and reports what it measured."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tinystream.bench.log_bench import batch_of_size, log_bench_command, parse_size, run_log_bench


def test_batch_of_size_is_exact():
    for size in (128, 1024, 16384, 100_000):
        assert len(batch_of_size(size)) == size


def test_parse_size():
    assert [parse_size(t) for t in ("1KiB", "16KiB", "1MiB", "4096", "2k")] == [1024, 16384, 1 << 20, 4096, 2048]


def test_run_returns_figures(tmp_path):
    result = run_log_bench(
        sizes=(1024, 4096), total_bytes=256 * 1024, directory=tmp_path, progress=False, lookup_batches=20_000,
        lookup_samples=500,
    )
    sizes = result["sizes"]
    assert [row["batch_bytes"] for row in sizes] == [1024, 4096]
    for row in sizes:
        assert row["batches"] * row["batch_bytes"] == row["bytes"]
        assert row["append"]["log"]["mb_per_s"] > 0 and row["append"]["ratio"] > 0
        assert row["read"]["log"]["batches_per_s"] > 0
    assert result["lookup"]["batches"] == 20_000 and result["lookup"]["locate_us_median"] > 0
    assert list(tmp_path.iterdir()) == []  # temporary files are gone


def test_command_prints_one_json_object(tmp_path):
    runner = CliRunner()
    outcome = runner.invoke(
        log_bench_command,
        ["--sizes", "1KiB", "--total-mb", "0.25", "--dir", str(tmp_path), "--json", "--lookup-batches", "1000"],
    )
    assert outcome.exit_code == 0, outcome.output
    figures = json.loads(outcome.stdout)
    assert figures["sizes"][0]["batch_size"] == "1KiB" and figures["fsync"] is False


def test_command_rejects_bad_sizes():
    outcome = CliRunner().invoke(log_bench_command, ["--sizes", "tiny"])
    assert outcome.exit_code != 0 and "size" in outcome.output
