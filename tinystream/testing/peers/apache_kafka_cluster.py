"""Apache Kafka as a 3-node peer: three combined broker+controller KRaft nodes, a 3-voter quorum.

The counterpart of our `LocalCluster` (tinystream/dev/cluster.py) in `bench compare --cells replicated
--cells latency`. Each node is the single-node peer's launch (apache_kafka.py: StorageTool format, then
kafka.Kafka) with its own node.id, a static `controller.quorum.voters` naming all three, and the
replicated values Kafka's production advice uses (RF 3 for the offsets and transaction topics,
min.insync.replicas 2). All three are spawned before any is waited for: a node serves Metadata only once
the quorum has a leader, which needs two voters up. Heaps are small (-Xmx512m each) so three JVMs fit
beside the benchmark on a small machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tinystream.testing.peers.apache_kafka import (
    KAFKA_MAIN,
    STORAGE_TOOL,
    _cluster_id,
    _log4j_config,
    jars_dir,
    java_executable,
    java_tool_argv,
    kafka_version,
    server_properties,
)
from tinystream.testing.peers.errors import PeerStartError
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.probe import wait_ready
from tinystream.testing.peers.process import RunningBroker, make_workdir

CLUSTER_JVM_OPTS = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")


@dataclass
class KafkaCluster:
    """Three running nodes; stop() stops them all (SIGTERM, then SIGKILL) and removes the folder it made."""

    nodes: list[RunningBroker]
    workdir: Path
    remove_workdir: bool
    version: str
    failed: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def pgids(self) -> tuple[int, ...]:
        """Each node's process group (each was started in its own session): the cluster's CPU cost."""
        return tuple(node.process.pid for node in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if self.remove_workdir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)


def cluster_properties(*, node_id: int, ports: list[int], controller_ports: list[int], log_dir: Path,
                       extra: Mapping[str, object] | None = None) -> dict[str, str]:
    """Node `node_id` (1-based) of a 3-voter combined cluster on loopback; `extra`: this node's own settings
    (broker.rack, ...), last."""
    index = node_id - 1
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(controller_ports))
    rf = len(ports)
    return server_properties(port=ports[index], controller_port=controller_ports[index], log_dir=log_dir, overrides={
        "node.id": node_id, "controller.quorum.voters": voters,
        "offsets.topic.replication.factor": min(rf, 3), "transaction.state.log.replication.factor": min(rf, 3),
        "transaction.state.log.min.isr": min(rf, 2), "share.coordinator.state.topic.replication.factor": min(rf, 3),
        "share.coordinator.state.topic.min.isr": min(rf, 2), "default.replication.factor": min(rf, 3),
        "min.insync.replicas": min(rf, 2), "group.initial.rebalance.delay.ms": 0, **(extra or {}),
    })


def start_kafka_cluster(*, nodes: int = 3, workdir: str | Path | None = None, timeout: float = 180.0,
                        jvm_opts: tuple[str, ...] = CLUSTER_JVM_OPTS, log_level: str = "WARN",
                        node_overrides: Mapping[int, Mapping[str, object]] | None = None) -> KafkaCluster:
    """Format and start `nodes` combined KRaft nodes; returns when every node serves Metadata.
    `node_overrides`: node id (1-based) -> that node's own settings (broker.rack, ...)."""
    jars = jars_dir()
    java = java_executable()
    directory, created = make_workdir(workdir, "kafka-cluster")
    ports = [free_port() for _ in range(nodes)]
    controller_ports = [free_port() for _ in range(nodes)]
    cluster_id = _cluster_id()
    running: list[RunningBroker] = []
    cluster = KafkaCluster(nodes=running, workdir=directory, remove_workdir=created, version=kafka_version(jars))
    try:
        for node_id in range(1, nodes + 1):
            node_dir = directory / f"node-{node_id}"
            node_dir.mkdir(parents=True, exist_ok=True)
            props = cluster_properties(node_id=node_id, ports=ports, controller_ports=controller_ports,
                                       log_dir=node_dir / "kraft-logs", extra=(node_overrides or {}).get(node_id))
            config = node_dir / "server.properties"
            config.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
            log_config = _log4j_config(node_dir, log_level)
            fmt = subprocess.run(  # noqa: S603
                java_tool_argv(STORAGE_TOOL, ["format", "-t", cluster_id, "-c", str(config)], log_config=log_config),
                capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            if fmt.returncode != 0:
                raise PeerStartError(f"kafka node {node_id}: storage format failed ({fmt.returncode}):\n"
                                     f"{fmt.stdout}\n{fmt.stderr}")
            log_path = node_dir / "broker.log"
            with open(log_path, "ab") as log:
                process = subprocess.Popen(  # noqa: S603 - argv built here
                    [java, *jvm_opts, f"-Dlog4j2.configurationFile={log_config}", "-cp", f"{jars}/*", KAFKA_MAIN,
                     str(config)],
                    cwd=node_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            running.append(RunningBroker(name=f"kafka-{node_id}", host="127.0.0.1", port=ports[node_id - 1],
                                         process=process, workdir=node_dir, log_path=log_path,
                                         version=cluster.version))
        for node in running:
            result = wait_ready(node.host, node.port, timeout=timeout, alive=node.alive)
            if not result.ready:
                raise PeerStartError(f"{node.name} at {node.bootstrap} not ready ({result.reason}); "
                                     f"log {node.log_path}:\n{node.log_tail()}")
        return cluster
    except BaseException:
        cluster.remove_workdir = False  # keep the logs of a cluster that did not come up
        cluster.stop()
        raise
