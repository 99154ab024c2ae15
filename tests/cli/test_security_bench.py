"""`tinystream bench produce|consume --security ...`: pairs with PLAINTEXT, medians and ranges (issue 12)."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from tinystream.bench.security_bench import check_security_options, pair_order, summarize
from tinystream.bench.stats import RunResult, Spread
from tinystream.cli import cli


def result(target: str, records_per_s: float) -> RunResult:
    return RunResult(target=target, bootstrap="x:1", client="confluent", operation="produce", records=int(records_per_s),
                     bytes=0, seconds=1.0, latency_ms={}, latency_unit="record")


def test_pairs_alternate_their_order_and_ratios_are_taken_per_round():
    assert [pair_order("SSL", r) for r in range(3)] == [("PLAINTEXT", "SSL"), ("SSL", "PLAINTEXT"), ("PLAINTEXT", "SSL")]
    summary = summarize("SSL", [(result("PLAINTEXT", 100), result("SSL", 80)),
                                (result("PLAINTEXT", 200), result("SSL", 100)),
                                (result("PLAINTEXT", 100), result("SSL", 90))])
    assert summary.ratio == Spread(median=0.8, low=0.5, high=0.9, count=3)
    assert summary.plaintext.median == 100 and summary.secured.median == 90
    assert "ratio 0.80 [0.50..0.90] over 3 rounds" in summary.line()


@pytest.mark.parametrize("args", [["--security", "SSL"], ["--client", "confluent", "--security", "SSL", "--bootstrap", "h:1"],
                                  ["--client", "java", "--security", "SASL_SSL"]])
def test_security_needs_the_confluent_client_and_its_own_broker(args):
    outcome = CliRunner().invoke(cli, ["bench", "produce", *args])
    assert outcome.exit_code == 2 and "--security" in outcome.output


def test_kafkas_java_tools_measure_ssl_alone():
    """The Java tools are given TLS settings (tls_cells.java_client_props), not SASL ones."""
    check_security_options("java", None, (), ["SSL"])
    with pytest.raises(click.UsageError):
        check_security_options("java", None, (), ["SSL", "SASL_PLAINTEXT"])


@pytest.mark.parametrize("benchmark", ["produce", "consume"])
def test_a_small_run_over_ssl_and_scram(benchmark):
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("trustme")
    outcome = CliRunner().invoke(cli, [
        "bench", benchmark, "--client", "confluent", "--security", "SSL", "--security", "SASL_SSL",
        "--rounds", "2", "--records", "3000", "--partitions", "2", "--json", "--quiet"])
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.stdout[outcome.stdout.index("{"):])
    assert [s["protocol"] for s in report["summaries"]] == ["SSL", "SASL_SSL"]
    for summary in report["summaries"]:
        assert summary["ratio_to_plaintext"]["rounds"] == 2 and summary["ratio_to_plaintext"]["median"] > 0
    for runs in report["runs"].values():
        assert all(a["records"] >= 3000 and b["records"] >= 3000 for a, b in runs)  # consume reads whole batches
