"""franz-go's admin client (kadm) against a 3-broker TinyStream and a 3-node Apache Kafka, same assertions.

kadmcheck (tests/compat/go/kadmcheck, built by tools/install-go-programs.sh) runs one sequence of kadm
calls against a bootstrap address and prints, per call, Kafka's error name ("" when it worked) and what
it read back: ListBrokers and BrokerMetadata; CreateTopic (2 partitions, RF 2); AlterPartitionAssignments
reversing partition 0's two replicas, then ListPartitionReassignments; ElectLeaders (preferred), which
moves partition 0's leader to the new first replica and finds partition 1 needs none; DescribeAllLogDirs,
every partition on exactly its replicas; AlterClientQuotas and DescribeClientQuotas (set, then remove);
DescribeBrokerConfigs and AlterBrokerConfigs on message.max.bytes (a per-broker dynamic config); DeleteTopics.
Both clusters are the benchmarks' 3-broker ones (tinystream/bench/cluster_cells.py open_cluster), started
here whatever TINYSTREAM_COMPAT_TARGET says; under another target the module skips (it ran with the default).
Kafka applies quota and config changes through its metadata log, so kadmcheck reads them until they show.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinystream.bench.cluster_cells import ClusterTarget, open_cluster
from tinystream.testing.peers import PeerUnavailable

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MESSAGE_MAX_BYTES = "1048588"  # Kafka's default (1 MiB + the record batch overhead)


def kadmcheck_binary() -> Path:
    folder = Path(os.environ.get("TINYSTREAM_GO_TOOLS", ROOT / ".cache" / "go-tools"))
    binary = folder / "kadmcheck"
    if not binary.is_file():
        pytest.skip(f"kadmcheck not built in {folder}: run tools/install-go-programs.sh kadmcheck")
    return binary


@pytest.fixture(scope="module", params=["tinystream", "kafka"])
def cluster(request) -> Iterator[ClusterTarget]:
    if (os.environ.get("TINYSTREAM_COMPAT_TARGET", "tinystream").strip() or "tinystream") != "tinystream":
        pytest.skip("test_kadm starts both 3-broker clusters itself: it runs with the default target")
    kadmcheck_binary()  # skip before starting three brokers
    if request.param == "kafka":
        from tinystream.testing.peers.apache_kafka import jars_dir, java_executable

        try:
            jars_dir()
            java_executable()
        except PeerUnavailable as exc:
            pytest.skip(str(exc))
    with open_cluster(request.param, quiet=True) as target:
        yield target


def run_kadmcheck(bootstrap: str) -> dict[str, dict]:
    name = f"kadm-{uuid.uuid4().hex[:8]}"
    out = subprocess.run([str(kadmcheck_binary()), "-bootstrap", bootstrap, "-topic", name,  # noqa: S603
                          "-client-id", name], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    steps = json.loads(out.stdout.strip().splitlines()[-1])["steps"]
    return {step["call"]: step for step in steps}


def test_kadm_admin_calls(cluster: ClusterTarget) -> None:
    steps = run_kadmcheck(cluster.bootstrap)
    failed = {call: step["error"] for call, step in steps.items() if step["error"]}
    assert failed == {}, f"{cluster.name}: {failed}"
    result = {call: step.get("result") for call, step in steps.items()}
    assert len(result["ListBrokers"]["broker_ids"]) == 3
    assert result["BrokerMetadata"] == {"brokers": 3, "controller_is_a_broker": True}
    assert result["CreateTopic"]["partitions"] == 2 and result["CreateTopic"]["replication_factor"] == 2
    assert result["AlterPartitionAssignments"] == {"partitions": 1}
    # A reorder moves no data: done at once, and the old leader stays until an election.
    assert result["ListPartitionReassignments"] == {"pending": 0, "replicas_are_the_new_order": True,
                                                    "leader_is_the_old_one": True}
    assert result["ElectLeaders"] == {"partitions": {"0": "NONE", "1": "ELECTION_NOT_NEEDED"},
                                      "leader_is_the_new_preferred": True}
    assert result["DescribeAllLogDirs"] == {"brokers_answering": 3,
                                            "partition_on_its_replicas": {"0": True, "1": True}}
    assert result["AlterClientQuotas(set)"] == {"entities": 1}
    assert result["DescribeClientQuotas(after set)"] == {"producer_byte_rate": 1048576,
                                                         "consumer_byte_rate": 2097152}
    assert result["DescribeClientQuotas(after remove)"] in ({}, None)
    default = {"value": DEFAULT_MESSAGE_MAX_BYTES, "source": "DEFAULT_CONFIG"}
    assert result["DescribeBrokerConfigs(before)"] == default
    assert result["DescribeBrokerConfigs(after set)"] == {"value": "2000000", "source": "DYNAMIC_BROKER_CONFIG"}
    assert result["DescribeBrokerConfigs(after delete)"] == default
    assert result["DeleteTopics"] == {"gone_from_metadata": True}
