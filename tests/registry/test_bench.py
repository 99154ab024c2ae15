"""`tinystream bench registry`, small: it registers what it says and reads every id back both ways."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from tinystream.bench.registry_bench import RegistryFigures, ratios, registry_bench_command


def test_the_bench_against_a_running_registry_prints_its_three_figures(start_registry):
    registry = start_registry()
    result = CliRunner().invoke(registry_bench_command, ["--url", registry.url, "--schemas", "5", "--lookups", "20",
                                                         "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["registered"] == 5
    assert all(figures[k] > 0 for k in ("register_per_s", "lookup_uncached_per_s", "lookup_cached_per_s"))
    assert len(registry.server.state.schemas) == 5  # five new schemas, each under its own subject


def test_the_bench_starts_its_own_registry_on_a_cluster(broker):
    result = CliRunner().invoke(registry_bench_command, ["--bootstrap", broker.bootstrap, "--schemas", "3",
                                                         "--lookups", "10"])
    assert result.exit_code == 0, result.output
    assert "register" in result.output and "look-up, cached" in result.output


def test_the_bench_wants_one_target():
    result = CliRunner().invoke(registry_bench_command, [])
    assert result.exit_code != 0 and "--bootstrap" in result.output


def test_peer_needs_a_cluster_to_start_it_on():
    result = CliRunner().invoke(registry_bench_command, ["--url", "http://127.0.0.1:1", "--peer", "karapace"])
    assert result.exit_code != 0 and "--peer starts the peer on a cluster" in result.output


def test_ratios_are_ours_over_the_peer():
    ours, peer = RegistryFigures(5, 100.0, 1000.0, 10.0), RegistryFigures(5, 50.0, 4000.0, 10.0)
    assert ratios(ours, peer) == {"register_per_s": 2.0, "uncached_per_s": 0.25, "cached_per_s": 1.0}


def test_the_bench_against_karapace_prints_both_and_the_ratio(broker):
    from tinystream.testing.peers.errors import PeerUnavailable
    from tinystream.testing.peers.karapace import karapace_argv

    try:
        karapace_argv()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    result = CliRunner().invoke(registry_bench_command, ["--bootstrap", broker.bootstrap, "--peer", "karapace",
                                                         "--schemas", "3", "--lookups", "10", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["peer"]["name"] == "karapace" and figures["peer"]["registered"] == 3
    assert set(figures["ratio"]) == {"register_per_s", "uncached_per_s", "cached_per_s"}
    assert all(value > 0 for value in figures["ratio"].values())
