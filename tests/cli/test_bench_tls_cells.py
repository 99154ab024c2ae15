"""`bench compare`'s TLS cells: both brokers get an SSL listener, Kafka's tools get a PEM truststore, the
raw client and peers not started here are refused, and (slow) one real run against Kafka 4.3.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tinystream.bench.compare import CELLS
from tinystream.bench.targets import Target
from tinystream.bench.tls_cells import TlsFiles, java_client_config, java_client_props, ssl_twin
from tinystream.cli import cli
from tinystream.testing.peers.apache_kafka import server_properties


def test_kafka_gets_an_ssl_listener_beside_plaintext_and_the_controller() -> None:
    props = server_properties(port=9092, controller_port=9093, log_dir=Path("/tmp/x"),
                              extra_listeners={"SSL": 9094})
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL"
    plain = server_properties(port=9092, controller_port=9093, log_dir=Path("/tmp/x"))
    assert "SSL" not in plain["listeners"] + plain["listener.security.protocol.map"]


def test_the_ssl_twin_keeps_plaintext_for_set_up_and_java_reads_the_ca_as_a_pem_truststore(tmp_path) -> None:
    files = TlsFiles(keystore=tmp_path / "broker.pem", ca=tmp_path / "ca.pem")
    twin = ssl_twin(Target(name="kafka", bootstrap="127.0.0.1:9092"), files, 9094)
    assert twin.bootstrap == "127.0.0.1:9094" and twin.for_setup().bootstrap == "127.0.0.1:9092"
    assert java_client_props(twin.client_config) == [
        "security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={files.ca}"]
    with java_client_config(twin.client_config) as path:
        assert Path(path).read_text().splitlines()[0] == "security.protocol=SSL"
    with java_client_config({}) as path:
        assert path == "/dev/null"
    with pytest.raises(ValueError, match="sasl.username"):
        java_client_props({"sasl.username": "x"})


def test_tls_cells_refuse_the_raw_client_and_a_peer_not_started_here() -> None:
    assert {"produce-tls", "consume-tls"} <= set(CELLS)
    raw = CliRunner().invoke(cli, ["bench", "compare", "--client", "raw", "--cells", "produce-tls"])
    assert raw.exit_code == 2 and "PLAINTEXT only" in raw.output
    tansu = CliRunner().invoke(cli, ["bench", "compare", "--peer", "tansu", "--cells", "consume-tls"])
    assert tansu.exit_code == 2 and "needs --peer kafka" in tansu.output


@pytest.mark.slow
def test_both_brokers_serve_the_tls_cells_to_kafkas_perf_tools(tmp_path) -> None:
    from tinystream.testing.peers import PeerUnavailable
    from tinystream.testing.peers.apache_kafka import jars_dir

    try:
        jars_dir()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    result = CliRunner().invoke(cli, [
        "bench", "compare", "--peer", "kafka", "--cells", "produce-tls", "--cells", "consume-tls",
        "--rounds", "1", "--records", "20000", "--partitions", "2", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "compare.json").read_text())
    pairs = {p["cell"]: p for p in report["pairs"]}
    assert set(pairs) == {"produce-tls", "consume-tls"}
    for pair in pairs.values():
        ours, peer = pair["ours"], pair["peer"]
        assert ours["records"] >= 20_000 and peer["records"] >= 20_000
        assert ours["bootstrap"] != peer["bootstrap"]
    assert "| consume-tls |" in (tmp_path / "compare.md").read_text()
