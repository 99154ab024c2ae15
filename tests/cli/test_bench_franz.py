"""`--client franz`: franzbench (tests/compat/go/franzbench, franz-go's kgo) as the load generator of bench
consume / produce / compare. Fast: the command lines it is given and the result line read back. Slow: the
real binary against our broker and Apache Kafka 4.3.1, PLAINTEXT and TLS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tinystream.bench import franz_client
from tinystream.cli import cli
from tinystream.testing.peers import PeerUnavailable

CA = {"security.protocol": "SSL", "ssl.ca.location": "/tmp/ca.pem"}


def test_the_consume_command_reads_from_the_ssl_listener_with_the_ca() -> None:
    plain = franz_client.consume_command(Path("/x/franzbench"), "127.0.0.1:9092", {}, topic="t", records=2_000_000,
                                         fetch_bytes=8 << 20, max_bytes=64 << 20, timeout_s=120.0)
    assert plain == ["/x/franzbench", "-brokers", "127.0.0.1:9092", "-topic", "t", "-records", "2000000",
                     "-fetch-bytes", "8388608", "-max-bytes", "67108864", "-timeout", "120s"]
    tls = franz_client.consume_command(Path("/x/franzbench"), "127.0.0.1:9094", CA, topic="t", records=5,
                                       fetch_bytes=1024, max_bytes=2048, timeout_s=60.5)
    assert tls[-4:] == ["-timeout", "60s", "-ca", "/tmp/ca.pem"]


def test_the_produce_command_names_its_codec_and_batch_size() -> None:
    command = franz_client.produce_command(Path("fb"), "h:1", {}, topic="t", records=10, record_size=100,
                                           compression="lz4", batch_bytes=262_144, timeout_s=120.0)
    assert command[:2] == ["fb", "-produce"]
    flags = dict(zip(command[2::2], command[3::2]))
    assert flags == {"-brokers": "h:1", "-topic": "t", "-records": "10", "-record-bytes": "100",
                     "-compression": "lz4", "-batch-bytes": "262144", "-timeout": "120s"}


def test_only_plaintext_and_ssl_with_a_ca_are_spoken() -> None:
    assert franz_client.tls_args({}) == [] and franz_client.tls_args({"security.protocol": "PLAINTEXT"}) == []
    with pytest.raises(ValueError, match="SASL_SSL"):
        franz_client.tls_args({**CA, "security.protocol": "SASL_SSL"})
    with pytest.raises(ValueError, match="sasl.username"):
        franz_client.tls_args({**CA, "sasl.username": "u"})
    with pytest.raises(ValueError, match="needs ssl.ca.location"):
        franz_client.tls_args({"security.protocol": "SSL"})


def test_the_result_is_the_last_json_line() -> None:
    line = ('{"operation":"consume","records":2000088,"bytes":200008800,"seconds":1.5,"records_per_s":1333392,'
            '"mb_per_s":133.3,"polls":40}')
    row = franz_client.parse_result(f"[INFO] starting\n{line}\n")
    assert row is not None and (row.records, row.bytes, row.seconds, row.polls) == (2_000_088, 200_008_800, 1.5, 40)
    assert row.error == "" and row.raw["mb_per_s"] == 133.3
    assert row.cpu_seconds is None  # a binary built before franzbench reported its CPU
    timed = franz_client.parse_result('{"records":10,"bytes":1000,"seconds":2.0,"cpu_seconds":1.5}')
    assert timed is not None and timed.cpu_seconds == 1.5
    assert franz_client.parse_result("no result\n") is None
    assert franz_client.parse_result("{not json\n") is None
    assert franz_client.parse_result('{"other": 1}\n') is None
    failed = franz_client.parse_result('{"records":0,"bytes":0,"seconds":120,"error":"context deadline exceeded"}')
    assert failed is not None and failed.error == "context deadline exceeded"


def test_a_missing_binary_is_named_with_its_install_step(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TINYSTREAM_GO_TOOLS", str(tmp_path))
    with pytest.raises(PeerUnavailable, match="install-go-programs.sh"):
        franz_client.franz_binary()
    result = CliRunner().invoke(cli, ["bench", "compare", "--client", "franz", "--cells", "consume"])
    assert result.exit_code == 2 and "install-go-programs.sh" in result.output


def _needs_franzbench_and_kafka() -> None:
    from tinystream.testing.peers.apache_kafka import jars_dir, java_executable

    try:
        franz_client.franz_binary()
        jars_dir()
        java_executable()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
def test_franzbench_reads_every_record_from_both_brokers_plaintext_and_tls(tmp_path) -> None:
    _needs_franzbench_and_kafka()
    result = CliRunner().invoke(cli, [
        "bench", "compare", "--peer", "kafka", "--client", "franz", "--cells", "consume", "--cells", "consume-tls",
        "--rounds", "1", "--records", "20000", "--partitions", "2", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "compare.json").read_text())
    assert report["client"] == "franz"
    pairs = {p["cell"]: p for p in report["pairs"]}
    assert set(pairs) == {"consume", "consume-tls"}
    for pair in pairs.values():
        for side in (pair["ours"], pair["peer"]):
            assert side["client"] == "franz" and side["records"] >= 20_000
            assert side["client_cpu_s"] > 0 and side["client_cores"] is not None  # franzbench's own CPU
    assert pairs["consume-tls"]["ours"]["bootstrap"] != pairs["consume"]["ours"]["bootstrap"]


@pytest.mark.slow
def test_franzbench_produces_to_our_broker() -> None:
    try:
        franz_client.franz_binary()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    result = CliRunner().invoke(cli, ["bench", "produce", "--client", "franz", "--records", "20000", "--json",
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (ours,) = report["results"]
    assert ours["client"] == "franz" and ours["records"] >= 20_000 and ours["verified"]
    assert ours["client_cpu_s"] > 0
