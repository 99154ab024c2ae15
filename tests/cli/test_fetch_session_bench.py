"""`tinystream bench fetch-sessions`, small: two brokers, one round, the on/off figures it prints."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tinystream.bench.fetch_session_bench import fetch_session_bench_command


def test_sessions_on_send_and_receive_less_than_off() -> None:
    result = CliRunner().invoke(fetch_session_bench_command, [
        "--partitions", "40", "--rounds", "1", "--fetches", "10", "--light-partitions", "2", "--json", "--quiet",
    ])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rounds = {(r["load"], r["mode"]): r for r in report["rounds"]}
    assert set(rounds) == {("idle", "on"), ("idle", "off"), ("light", "on"), ("light", "off")}
    assert rounds[("idle", "on")]["incremental"] == 10 and rounds[("idle", "off")]["incremental"] == 0
    assert rounds[("idle", "on")]["partitions_answered"] == 0  # nothing new: an empty answer
    assert rounds[("idle", "off")]["partitions_answered"] == 40 * 10
    # light: the two partitions written before each fetch are answered (at most; a batch may land in the same one).
    assert 10 <= rounds[("light", "on")]["partitions_answered"] <= 20
    for load in ("idle", "light"):
        assert report["on_over_off"][load]["request B/fetch"] < 0.3
        assert report["on_over_off"][load]["response B/fetch"] < 0.5


def test_followers_take_no_peer() -> None:
    result = CliRunner().invoke(fetch_session_bench_command, ["--followers", "--peer", "kafka"])
    assert result.exit_code == 2 and "--followers" in result.output


@pytest.mark.slow
def test_ours_against_kafka_both_keep_a_session() -> None:
    from tinystream.testing.peers import PeerUnavailable
    from tinystream.testing.peers.apache_kafka import jars_dir

    try:
        jars_dir()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    result = CliRunner().invoke(fetch_session_bench_command, [
        "--peer", "kafka", "--partitions", "40", "--rounds", "1", "--fetches", "10", "--light-partitions", "2",
        "--json", "--quiet",
    ])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rounds = {(r["load"], r["mode"]): r for r in report["rounds"]}
    assert set(rounds) == {(load, side) for load in ("idle", "light") for side in ("tinystream", "kafka")}
    for side in ("tinystream", "kafka"):  # Kafka gives the same consumer a session: every measured fetch incremental
        assert rounds[("idle", side)]["incremental"] == 10
        assert rounds[("idle", side)]["partitions_answered"] == 0
        assert 10 <= rounds[("light", side)]["partitions_answered"] <= 20
    assert set(report["tinystream_over_kafka"]) == {"idle", "light"}
