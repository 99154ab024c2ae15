"""AlterReplicaLogDirs through Kafka's kafka-reassign-partitions.sh ("log_dirs" in its JSON), against a
broker of the compat target's kind started here with two log dirs (TinyStream or Apache Kafka).

Same assertions on both: --execute succeeds, --verify reports the replica's move completed,
kafka-log-dirs.sh shows the partition in the other dir, every record written before is read back.
A restart after a move, the refusals and ACLs: tests/broker/handlers/test_alter_log_dirs.py.
"""

from __future__ import annotations

import json
import os

import compat_helpers as ch
import pytest
from compat_helpers import require_client

from tinystream.testing.consumers import read_partition
from tinystream.testing.peers import PeerUnavailable
from tinystream.testing.peers.apache_kafka import run_java_tool, start_apache_kafka
from tinystream.testing.peers.tinystream_broker import start_tinystream
from tinystream.testing.waiting import wait_until

pytestmark = pytest.mark.compat

LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


@pytest.fixture(scope="module")
def two_dir_broker(tmp_path_factory):
    """(bootstrap, [dir, dir]) of a broker of the target's kind with two log dirs."""
    target = os.environ.get("TINYSTREAM_COMPAT_TARGET", "tinystream").strip() or "tinystream"
    root = tmp_path_factory.mktemp("two-dirs")
    dirs = [str(root / "d1"), str(root / "d2")]
    try:
        if target == "tinystream":
            running = start_tinystream(workdir=root / "broker", extra_args=("--log-dirs", ",".join(dirs)),
                                       overrides={"group.initial.rebalance.delay.ms": 0})
        elif target == "kafka":
            running = start_apache_kafka(workdir=root / "kafka", overrides={
                "log.dirs": ",".join(dirs), "group.initial.rebalance.delay.ms": 0})
        else:
            pytest.skip(f"needs a broker started with two log dirs; {target} is not started here")
    except PeerUnavailable as exc:
        pytest.skip(f"{target} broker unavailable: {exc}")
    try:
        yield running.bootstrap, dirs
    finally:
        running.stop()


def _where(bootstrap: str, topic: str) -> dict[str, str]:
    """Partition name -> the log dir kafka-log-dirs.sh reports it in."""
    out = run_java_tool(LOG_DIRS_COMMAND, ["--bootstrap-server", bootstrap, "--describe", "--topic-list", topic],
                        timeout=90)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (broker,) = json.loads(out.stdout.strip().splitlines()[-1])["brokers"]
    return {p["partition"]: d["logDir"] for d in broker["logDirs"] for p in d["partitions"] if not p["isFuture"]}


def test_kafka_reassign_partitions_moves_a_replica_to_the_other_log_dir(two_dir_broker, tmp_path):
    require_client("java")
    require_client("confluent")
    bootstrap, dirs = two_dir_broker
    topic = ch.create_topic(bootstrap, ch.unique_name("move-dir"), 1)
    records = ch.make_records(100, pad_to=100)
    ch.produce("confluent", bootstrap, topic, records)
    before = _where(bootstrap, topic)[f"{topic}-0"]
    target = next(d for d in dirs if os.path.abspath(d) != os.path.abspath(before))
    admin = ch.confluent_admin(bootstrap)
    (broker_id,) = [n.id for n in admin.describe_cluster().result(timeout=30).nodes]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [broker_id], "log_dirs": [target]}]}))

    def reassign(action: str):
        return run_java_tool(REASSIGN_COMMAND, ["--bootstrap-server", bootstrap, action,
                                                "--reassignment-json-file", str(plan)], timeout=90)

    executed = reassign("--execute")
    assert executed.returncode == 0, executed.stdout[-2000:] + executed.stderr[-2000:]

    last: list[str] = [""]

    def moved() -> str | None:
        verified = reassign("--verify")
        last[0] = verified.stdout
        assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
        done = f"Reassignment of replica {topic}-0-{broker_id} completed successfully"
        return verified.stdout if done in verified.stdout else None

    try:
        wait_until(moved, timeout=int(os.environ.get("MOVE_WAIT_S", "120")), what="the replica's move between log dirs", interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; --verify said:\n{last[0][-2000:]}") from None
    assert os.path.abspath(_where(bootstrap, topic)[f"{topic}-0"]) == os.path.abspath(target)
    got = read_partition(bootstrap, topic, len(records))
    assert got == [r.value for r in records]
