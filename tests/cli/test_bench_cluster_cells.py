"""`bench compare --cells replicated --cells latency`: latency figures, the report, the 3-node Kafka config,
CPU over several process groups, and (slow) one real run on both 3-broker clusters."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tinystream.bench import e2e_latency
from tinystream.bench.compare_report import LatencyPair, latency_table, write_latency_picture
from tinystream.bench.consume_workloads import parse_consumer_performance
from tinystream.bench.cpu import groups_cpu_seconds
from tinystream.cli import cli
from tinystream.testing.peers.apache_kafka_cluster import cluster_properties


def test_percentiles_skip_the_warm_up_and_come_from_the_samples_kept() -> None:
    samples = [(0.5, 900.0), *((1.0 + i / 1000, float(i)) for i in range(1000))]
    figures = e2e_latency.summary(samples, skip_s=1.0)
    assert figures["count"] == 1000
    assert (figures["p50"], figures["p99"], figures["p99.9"], figures["max"]) == (500.0, 989.0, 998.0, 999.0)
    assert e2e_latency.summary(samples)["max"] == 999.0 and e2e_latency.summary(samples)["count"] == 1001
    assert e2e_latency.summary([], skip_s=0) == {}


def test_the_series_is_one_p99_per_second_received_and_a_silent_second_is_a_gap() -> None:
    samples = [(0.1, 5.0), (0.9, 7.0), *((2.0 + i / 200, float(i)) for i in range(100))]
    assert e2e_latency.per_second(samples) == [(0, 7.0), (2, 98.0)]  # second 1: nothing received, absent
    assert e2e_latency.per_second(samples, 0.5) == [(0, 5.0), (2, 50.0)]  # stats.percentile: nearest rank


def _latency_run(target: str, p50: float, p99: float, p999: float) -> e2e_latency.LatencyRun:
    return e2e_latency.LatencyRun(target=target, rate=20_000, records=1_200_000, expected=1_200_000, seconds=60.0,
                                  latency_ms={"p50": p50, "p99": p99, "p99.9": p999},
                                  series=[(0, p99 * 3), (1, p99), (2, p99)])


FIXED = [LatencyPair(0, _latency_run("tinystream", 4.0, 20.0, 40.0), _latency_run("kafka", 8.0, 10.0, 20.0)),
         LatencyPair(1, _latency_run("tinystream", 6.0, 30.0, 60.0), _latency_run("kafka", 6.0, 30.0, 40.0))]


def test_the_latency_table_gives_medians_ranges_and_the_per_round_ratio() -> None:
    text = latency_table(FIXED, "kafka")
    lines = text.splitlines()
    assert lines[0] == "| latency at 20,000 records/s (ms) | ours | kafka | ours / kafka |"
    assert lines[2] == "| p50 | 5.0 [4.0..6.0] | 7.0 [6.0..8.0] | 0.75 [0.50..1.00]x |"
    assert lines[3] == "| p99 | 25.0 [20.0..30.0] | 20.0 [10.0..30.0] | 1.50 [1.00..2.00]x |"
    assert lines[5] == "| received records/s | 20,000 [20,000..20,000] | 20,000 [20,000..20,000] | |"
    assert latency_table([], "kafka") == ""


def test_the_latency_picture_is_written_from_a_fixed_input(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    path = write_latency_picture(FIXED, "kafka", tmp_path)
    assert path == tmp_path / "latency.png" and path.read_bytes().startswith(b"\x89PNG")


def test_each_kafka_node_is_a_voter_of_the_same_three_node_quorum_with_replicated_defaults(tmp_path) -> None:
    props = [cluster_properties(node_id=n, ports=[9001, 9002, 9003], controller_ports=[9101, 9102, 9103],
                                log_dir=tmp_path / str(n)) for n in (1, 2, 3)]
    assert {p["controller.quorum.voters"] for p in props} == {"1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"}
    assert [p["node.id"] for p in props] == ["1", "2", "3"]
    assert props[1]["listeners"] == "PLAINTEXT://127.0.0.1:9002,CONTROLLER://127.0.0.1:9102"
    assert props[2]["offsets.topic.replication.factor"] == "3" and props[2]["min.insync.replicas"] == "2"


def test_cpu_is_summed_over_every_group_asked_for(tmp_path) -> None:
    def proc(pid: int, pgid: int, utime: int, stime: int) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(
            f"{pid} (python3) S 1 {pgid} {pgid} 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 1 0 0")

    proc(10, 10, 100, 50)
    proc(11, 10, 10, 0)
    proc(20, 20, 300, 0)
    proc(30, 30, 7000, 0)  # another group: not counted
    import os

    tick = os.sysconf("SC_CLK_TCK")
    assert groups_cpu_seconds({10, 20}, tmp_path) == pytest.approx(460 / tick)
    assert groups_cpu_seconds({10}, tmp_path) == pytest.approx(160 / tick)


def test_consumer_performance_output_is_read_from_its_header_line() -> None:
    out = ("WARN something\nstart.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
           "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
           "2026-11-28 06:00:00:000, 2026-11-28 06:00:02:000, 9.5, 4.7, 100000, 50000.0, 300, 1700, 5.6, 58823.5\n")
    row = parse_consumer_performance(out)
    assert row is not None and row["data.consumed.in.nMsg"] == "100000" and row["fetch.time.ms"] == "1700"
    assert parse_consumer_performance("no result\n") is None


def test_the_cluster_cells_need_a_three_node_peer() -> None:
    refused = CliRunner().invoke(cli, ["bench", "compare", "--peer", "tansu", "--cells", "latency"])
    assert refused.exit_code == 2 and "needs --peer kafka" in refused.output


@pytest.mark.slow
def test_both_three_broker_clusters_give_replicated_and_latency_figures(tmp_path) -> None:
    from tinystream.testing.peers import PeerUnavailable
    from tinystream.testing.peers.apache_kafka import jars_dir

    pytest.importorskip("confluent_kafka")
    try:
        jars_dir()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    result = CliRunner().invoke(cli, [
        "bench", "compare", "--peer", "kafka", "--cells", "replicated", "--cells", "latency", "--rounds", "1",
        "--replicated-records", "5000", "--latency-rate", "500", "--latency-seconds", "3", "--json",
        "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "compare.json").read_text())
    rows = {s["cell"]: s for s in report["summaries"]}
    assert set(rows) == {"replicated-produce", "replicated-consume"}
    assert all(rows[c][side]["rounds"] == 1 and rows[c][side]["median"] > 0 for c in rows
               for side in ("ours_records_per_s", "peer_records_per_s"))
    assert rows["replicated-produce"]["ours_cpu_s_per_gb"]["median"] > 0
    assert rows["replicated-produce"]["peer_cpu_s_per_gb"]["median"] > 0
    (latency,) = report["latency"]
    for side in ("ours", "peer"):
        assert latency[side]["records"] == latency[side]["expected"] == 1500
        assert latency[side]["latency_ms"]["p99"] >= latency[side]["latency_ms"]["p50"] >= 0
        assert latency[side]["per_second_p99_ms"]
    assert (tmp_path / "latency.png").read_bytes().startswith(b"\x89PNG")
    assert "| p99.9 |" in (tmp_path / "compare.md").read_text()
