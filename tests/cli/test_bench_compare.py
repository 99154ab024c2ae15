"""`tinystream bench compare`: pairs alternate, cells summarize to medians and ranges, files are written."""

from __future__ import annotations

from click.testing import CliRunner

from tinystream.bench.compare import CELLS, pair_order, run_matrix
from tinystream.bench.compare_report import Pair, summarize, table, write_pictures
from tinystream.bench.stats import RunResult
from tinystream.bench.targets import open_target
from tinystream.cli import cli


def _run(target: str, records_per_s: float, cpu_s: float | None = None) -> RunResult:
    return RunResult(target=target, bootstrap="x:1", client="java", operation="produce", records=int(records_per_s),
                     bytes=int(records_per_s) * 100, seconds=1.0, latency_ms={}, latency_unit="record",
                     broker_cpu_s=cpu_s)


def test_the_side_that_goes_first_alternates_by_cell_and_by_round() -> None:
    assert [pair_order(c, 0)[0] for c in range(4)] == ["ours", "peer", "ours", "peer"]
    assert [pair_order(c, 1)[0] for c in range(4)] == ["peer", "ours", "peer", "ours"]


def test_a_cell_summarizes_to_the_median_of_the_per_round_ratios_with_its_range() -> None:
    pairs = [Pair("produce", 0, _run("tinystream", 3e6, 0.6), _run("kafka", 1e6, 0.4)),
             Pair("produce", 1, _run("tinystream", 2e6, 0.5), _run("kafka", 2e6, 0.4)),
             Pair("produce", 2, _run("tinystream", 4e6, 0.8), _run("kafka", 2e6, 0.8)),
             Pair("consume", 0, _run("tinystream", 1e6), _run("kafka", 1e6))]
    produce, consume = summarize(["produce", "consume"], pairs)
    assert (produce.ratio.median, produce.ratio.low, produce.ratio.high) == (2.0, 1.0, 3.0)
    # CPU s per GB (10^9 bytes of 100-byte records): 2.0 vs 4.0, 2.5 vs 2.0, 2.0 vs 4.0
    assert (produce.cpu_ratio.median, produce.cpu_ratio.low, produce.cpu_ratio.high) == (0.5, 0.5, 1.25)
    assert consume.cpu_ratio.count == 0  # no CPU figure (a broker not started here): n/a, not zero
    text = table([produce, consume], "kafka")
    assert "| produce | 3.00 [2.00..4.00] | 2.00 [1.00..2.00] | 2.00 [1.00..3.00]x |" in text
    assert text.splitlines()[-1].endswith("| n/a | n/a | n/a |")


def test_the_load_generators_busy_cores_get_columns_when_it_reported_them() -> None:
    def franz(target: str, client_cpu_s: float) -> RunResult:
        return RunResult(target=target, bootstrap="x:1", client="franz", operation="consume", records=1_000,
                         bytes=100_000, seconds=0.5, latency_ms={}, latency_unit="n/a", client_cpu_s=client_cpu_s)

    pairs = [Pair("consume", 0, franz("tinystream", 0.55), franz("kafka", 0.5)),
             Pair("consume", 1, franz("tinystream", 0.5), franz("kafka", 0.45))]
    (consume,) = summarize(["consume"], pairs)
    assert (consume.ours_client_cores.median, consume.peer_client_cores.low) == (1.05, 0.9)
    header, _, row = table([consume], "kafka").splitlines()
    assert header.endswith("| client cores busy, ours | client cores busy, kafka |")
    assert row.endswith("| 1.05 [1.00..1.10] | 0.95 [0.90..1.00] |")
    assert "client cores" not in table(summarize(["produce"], [Pair("produce", 0, _run("a", 1e6), _run("b", 1e6))]),
                                       "kafka")  # ConsumerPerformance's runs: no column


def test_two_real_brokers_run_the_matrix_and_the_report_is_written(tmp_path) -> None:
    with open_target("tinystream", quiet=True) as ours, open_target("tinystream", quiet=True) as other:
        pairs = run_matrix({"ours": ours, "peer": other}, ["produce-lz4", "consume"], rounds=2, client="raw",
                           records=20_000, partitions=2, say=lambda _: None)
    assert [(p.cell, p.round_index) for p in pairs] == [("produce-lz4", 0), ("consume", 0), ("produce-lz4", 1),
                                                         ("consume", 1)]
    assert all(p.ours.verified and p.peer.verified for p in pairs)
    assert all(p.ours.bootstrap != p.peer.bootstrap for p in pairs)
    assert all(p.ours.records >= 20_000 and p.peer.records >= 20_000 for p in pairs)
    assert all(p.ours.cpu_s_per_gb is not None and p.peer.cpu_s_per_gb is not None for p in pairs)
    summaries = summarize(["produce-lz4", "consume"], pairs)
    written = write_pictures(summaries, pairs, "tinystream", tmp_path)
    assert [p.name for p in written] == ["throughput.png", "cpu.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def test_the_command_lists_its_cells_and_refuses_an_unknown_one() -> None:
    result = CliRunner().invoke(cli, ["bench", "compare", "--help"])
    assert result.exit_code == 0 and "--cells" in result.output and "ProducerPerformance" in result.output
    refused = CliRunner().invoke(cli, ["bench", "compare", "--cells", "produce-brotli"])
    assert refused.exit_code == 2 and "produce-brotli" in refused.output
    assert "consume-zstd" in CELLS
