"""`tinystream bench produce --schema registry`: plain vs confluent.value.schema.validation, on a real registry."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from click.testing import CliRunner

pytest.importorskip("fastavro")
pytest.importorskip("aiohttp")  # the registry ([registry] extra)

import fastavro

from tinystream.bench.batches import make_batch
from tinystream.bench.control import end_offsets
from tinystream.bench.produce_workloads import produce_once
from tinystream.bench.registry_produce import (
    AVRO_SCHEMA,
    INVALID_RECORD,
    UNKNOWN_ID,
    ValidationSummary,
    avro_value,
    avro_values,
    side_order,
)
from tinystream.bench.stats import RunResult
from tinystream.bench.targets import Target
from tinystream.bench.wire_client import WireConnection
from tinystream.cli import cli
from tinystream.registry.app import RegistryOptions
from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.peers.ports import free_port
from tinystream.testing.registry import RegistryThread


def test_values_carry_the_wire_prefix_and_decode_with_the_schema():
    value = avro_value(42, 7, 100)
    assert len(value) == 100
    assert value[:5] == b"\x00\x00\x00\x00\x2a"
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(AVRO_SCHEMA))
    assert record["id"] == 7 and record["kind"] == "VIEW" and set(record["note"]) == {"x"}
    assert {len(v) for v in avro_values(42, 1000, 4)} == {1000}
    assert len(avro_value(42, 7, 3)) > 3  # smaller than the record: the record, unpadded


def run(target: str, records_per_s: float, p99: float) -> RunResult:
    return RunResult(target=target, bootstrap="x:1", client="raw", operation="produce", records=int(records_per_s),
                     bytes=0, seconds=1.0, latency_ms={"p99": p99}, latency_unit="request")


def test_rounds_alternate_and_the_ratio_is_taken_per_round():
    assert [side_order(r) for r in range(3)] == [("plain", "validated"), ("validated", "plain"),
                                                 ("plain", "validated")]
    summary = ValidationSummary.of([(run("p", 100, 1.0), run("v", 80, 2.0)), (run("p", 200, 3.0), run("v", 100, 4.0)),
                                    (run("p", 100, 2.0), run("v", 90, 3.0))])
    assert summary.ratio.median == 0.8 and (summary.ratio.low, summary.ratio.high) == (0.5, 0.9)
    assert summary.plain_p99.median == 2.0 and summary.validated_p99.median == 3.0
    assert "registry validation costs 20.0% of records/s, p99 2.00 -> 3.00 ms" in summary.lines()[-1]


@pytest.mark.parametrize(("args", "says"), [
    (["--schema", "registry", "--bootstrap", "h:1"], "needs --registry-url"),
    (["--schema", "registry", "--registry-url", "http://h:1"], "--registry-url goes with --bootstrap"),
    (["--registry-url", "http://h:1"], "--registry-url goes with --schema registry"),
    (["--schema", "registry", "--client", "confluent"], "needs --client raw"),
    (["--schema", "registry", "--peer", "kafka"], "runs alone"),
])
def test_bad_option_combinations_are_usage_errors(args, says):
    outcome = CliRunner().invoke(cli, ["bench", "produce", *args])
    assert outcome.exit_code == 2 and says in outcome.output


@pytest.fixture
def stack(tmp_path):
    """A broker whose confluent.schema.registry.url names a port chosen first, then the registry on that port."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BrokerThread(test_settings(tmp_path / "data", **{"confluent.schema.registry.url": url})) as broker:
        with RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=port, topic="_schemas")):
            yield broker.bootstrap, url


async def _stored(bootstrap: str, topic: str) -> int:
    host, port = bootstrap.rsplit(":", 1)
    conn = await WireConnection.open(host, int(port))
    try:
        return sum((await end_offsets(conn, topic, 2)).values())
    finally:
        await conn.close()


def test_both_topics_store_every_record_and_the_validated_one_refuses_an_unknown_id(stack):
    bootstrap, url = stack
    outcome = CliRunner().invoke(cli, [
        "bench", "produce", "--schema", "registry", "--bootstrap", bootstrap, "--registry-url", url,
        "--records", "600", "--record-size", "100", "--batch-size", "4096", "--partitions", "2", "--warmup", "0",
        "--rounds", "2", "--topic", "t", "--json", "--quiet"])
    assert outcome.exit_code == 0, outcome.output
    figures = json.loads(outcome.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    assert figures["topics"] == {"plain": "t-plain", "validated": "t-validated"}
    assert len(figures["runs"]) == 2 and all(r["verified"] and r["records"] >= 600 for p in figures["runs"] for r in p)
    assert figures["summary"]["ratio_validated_to_plain"]["median"] > 0
    assert figures["unknown_id_error_code"] == INVALID_RECORD
    assert "registry validation costs" in outcome.stderr and "(INVALID_RECORD), as it must" in outcome.stderr
    for index, side in enumerate(("plain", "validated")):  # what the broker holds, asked again here
        assert asyncio.run(_stored(bootstrap, f"t-{side}")) == sum(pair[index]["records"] for pair in figures["runs"])
    target = Target(name="external", bootstrap=bootstrap)
    wrong = make_batch(10, 100, values=avro_values(UNKNOWN_ID, 100, 2))
    right = make_batch(10, 100, values=avro_values(figures["schema_id"], 100, 2))
    assert asyncio.run(produce_once(target, "t-validated", 0, wrong)) == INVALID_RECORD
    assert asyncio.run(produce_once(target, "t-validated", 0, right)) == 0
    assert asyncio.run(produce_once(target, "t-plain", 0, wrong)) == 0  # no validation there


def test_without_bootstrap_it_starts_a_broker_and_a_registry():
    outcome = CliRunner().invoke(cli, [
        "bench", "produce", "--schema", "registry", "--records", "600", "--batch-size", "4096", "--partitions", "2",
        "--rounds", "1", "--quiet"])
    assert outcome.exit_code == 0, outcome.output
    assert "with validation" in outcome.output and "broker CPU per GB" in outcome.output and "(INVALID_RECORD), as it must" in outcome.output


def test_a_broker_without_a_registry_url_is_a_clear_error(tmp_path):
    with BrokerThread(test_settings(tmp_path / "data")) as broker, \
            RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=0, topic="_schemas")) as registry:
        outcome = CliRunner().invoke(cli, [
            "bench", "produce", "--schema", "registry", "--bootstrap", broker.bootstrap, "--registry-url",
            registry.url, "--records", "10", "--batch-size", "4096", "--partitions", "1", "--quiet"])
    assert outcome.exit_code == 1
    assert "confluent.schema.registry.url" in outcome.output and "Traceback" not in outcome.output
