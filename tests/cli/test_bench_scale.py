"""`tinystream bench scale`: topic sizes, memory read from /proc, the report rows, and (slow) one small real
run of every cell against Kafka 4.3.1, restarts included."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from tinystream.bench.memory import group_rss_bytes, parse_rss_bytes
from tinystream.bench.scale_bench import summary_rows, topic_sizes
from tinystream.cli import cli


def test_partitions_go_into_topics_of_the_given_size_and_the_rest_into_a_last_one() -> None:
    assert topic_sizes(10_000, 500) == [500] * 20
    assert topic_sizes(1_201, 500) == [500, 500, 201]
    assert topic_sizes(3, 500) == [3]


def test_memory_is_the_resident_set_of_the_process_group() -> None:
    assert parse_rss_bytes("Name:\tpython\nVmRSS:\t  2048 kB\n") == 2 * 1024 * 1024
    assert parse_rss_bytes("Name:\tkthreadd\n") == 0
    mine = group_rss_bytes(os.getpgid(0))
    assert mine is not None and mine > 10 * 1024 * 1024  # this pytest process alone holds more
    assert group_rss_bytes(2 ** 22 + 12345) == 0  # no such group


def test_a_row_gives_both_medians_with_ranges_and_the_median_ratio() -> None:
    runs = [({"clean_restart_s": 2.0}, {"clean_restart_s": 8.0}), ({"clean_restart_s": 4.0}, {"clean_restart_s": 8.0}),
            ({"clean_restart_s": 3.0}, {"clean_restart_s": 4.0})]
    (row,) = summary_rows("log", runs, "kafka")
    assert row == "| log | clean_restart_s | 3.00 [2.00..4.00] | 8.00 [4.00..8.00] | 0.50x |"
    (zero,) = summary_rows("connections", [({"refused": 0.0}, {"refused": 0.0})], "kafka")
    assert zero.endswith("| n/a |")


def test_an_unknown_cell_is_refused() -> None:
    result = CliRunner().invoke(cli, ["bench", "scale", "--cells", "disks"])
    assert result.exit_code == 2 and "disks" in result.output


@pytest.mark.slow
def test_every_cell_runs_on_both_brokers_through_clean_and_unclean_restarts() -> None:
    from tinystream.testing.peers import PeerUnavailable
    from tinystream.testing.peers.apache_kafka import jars_dir

    try:
        jars_dir()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    result = CliRunner().invoke(cli, ["bench", "scale", "--peer", "kafka", "--partitions", "60", "--per-topic", "25",
                                      "--connections", "50", "--log-mb", "8", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    rounds = {r["cell"]: r for r in report["rounds"]}
    assert set(rounds) == {"partitions", "connections", "log"}
    for side in ("ours", "peer"):
        assert rounds["partitions"][side]["clean_restart_s"] > 0 and rounds["partitions"][side]["unclean_restart_s"] > 0
        assert rounds["partitions"][side]["rss_mb"] > 0
        assert rounds["connections"][side]["refused"] == 0
        assert rounds["log"][side]["log_mb"] == 8 and rounds["log"][side]["unclean_restart_s"] > 0
